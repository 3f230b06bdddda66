//! The scheduler's routes: `GET /healthz` (the process answers),
//! `GET /readyz` (it can serve terminals now, else 503 and why) and
//! `GET /metrics` (the Prometheus text of `metrics.rs`, behind
//! authentication like the API).
//!
//! The two probes answer anyone, on any `Host` and under or beside the
//! base path: a kubelet probes the pod's IP, a load balancer its own
//! idea of the host, and neither holds a token. So they say nothing but
//! ready or not and a reason without paths, names or counts.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::AppState;
use super::metrics::Sampled;

/// The probes' paths: answered whatever the base path (`listen/conn.rs`
/// leaves them as they are).
pub(crate) const PROBE_PATHS: [&str; 2] = ["/healthz", "/readyz"];

/// The probes' routes, outside the front door and authentication.
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
}

fn text(status: StatusCode, body: String) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

async fn healthz() -> Response {
    text(StatusCode::OK, "ok\n".to_owned())
}

/// Why the bridge cannot serve terminals now, if it cannot.
pub(crate) fn unready(state: &AppState) -> Option<String> {
    if state.shutdown.is_cancelled() {
        return Some("draining: this serve is stopping".to_owned());
    }
    if state.registry.is_disposing() {
        return Some("the registry is shutting down".to_owned());
    }
    if let Some(dir) = state.registry.state_dir() {
        use rustix::fs::{Access, access};
        if let Err(e) = access(dir.root(), Access::WRITE_OK | Access::EXEC_OK) {
            return Some(format!("the state directory is not writable: {e}"));
        }
    }
    state.registry.backend_health().problem
}

async fn readyz(State(state): State<AppState>) -> Response {
    match unready(&state) {
        None => text(StatusCode::OK, "ready\n".to_owned()),
        Some(why) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        ),
    }
}

/// `GET /metrics`: the Prometheus text format, version 0.0.4.
pub(super) async fn metrics(State(state): State<AppState>) -> Response {
    let sampled = Sampled {
        census: state.registry.census(),
        backend: state.registry.backend_health(),
        ready: unready(&state).is_none(),
    };
    let mut response = text(StatusCode::OK, state.metrics.render(&sampled));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}
