//! The page: `GET /` and its assets, compiled into the binary from `web/`
//! (the project's own JS/CSS) and `web/vendor/` (xterm.js and its fit
//! addon, vendored at pinned versions by `scripts/vendor-web`). Nothing is
//! fetched at run time and nothing is read from disk.

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Router, routing};

use super::AppState;
use super::auth::{cookie, query_token};

/// `(name under /assets/, content type, bytes)` of every embedded asset.
const ASSETS: &[(&str, &str, &str)] = &[
    ("app.js", JS, include_str!("../../web/app.js")),
    ("app.css", CSS, include_str!("../../web/app.css")),
    ("xterm.js", JS, include_str!("../../web/vendor/xterm.js")),
    ("xterm.css", CSS, include_str!("../../web/vendor/xterm.css")),
    (
        "addon-fit.js",
        JS,
        include_str!("../../web/vendor/addon-fit.js"),
    ),
];

const INDEX: &str = include_str!("../../web/index.html");
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// Scripts and styles from this origin only; xterm.js sets inline styles
/// on its elements, hence `'unsafe-inline'` for styles alone.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
                   connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
                   form-action 'none'; frame-ancestors 'none'";

/// `GET /` and `GET /assets/{name}` (both behind authentication).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", routing::get(index))
        .route("/assets/{name}", routing::get(asset))
}

/// The page. Loaded with `?token=`, it also sets the cookie that carries
/// the token from then on (the page's script then drops it from the URL).
async fn index(State(state): State<AppState>, RawQuery(query): RawQuery) -> Response {
    let mut response = with_headers(INDEX, "text/html; charset=utf-8");
    let query = query.unwrap_or_default();
    // Only a token that is valid by itself becomes the cookie (the request
    // may have been let in by another carrier).
    if let Some(token) = query_token(&query)
        && state.auth.authenticate(&HeaderMap::new(), &query).is_some()
        && let Ok(value) = HeaderValue::from_str(&cookie(&token))
    {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|(asset, ..)| *asset == name) {
        Some((_, kind, body)) => with_headers(body, kind),
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}

fn with_headers(body: &'static str, kind: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // The first URL carries the token: never hand it to another site.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}
