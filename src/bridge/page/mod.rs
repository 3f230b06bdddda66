//! The page: `GET /` and its assets, compiled into the binary from `web/`
//! (the project's own JS/CSS) and `web/vendor/` (xterm.js and its addons:
//! fit, webgl, web-links, clipboard, unicode11, image; vendored at pinned
//! versions by `scripts/vendor-web`). Nothing is fetched at run time and
//! nothing is read from disk. `serve --page-option` defaults reach the
//! page in a `<meta name="tmux-engine-options">` (see [`PageOptions`]).

mod encoded;
mod options;

pub use self::options::PageOptions;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Router, routing};

use super::AppState;
use crate::vocab::escape_markup;

/// A vendored script, served under its own name.
macro_rules! vendored {
    ($name:literal) => {
        (
            $name,
            JS,
            include_str!(concat!("../../../web/vendor/", $name)),
        )
    };
}

/// `(name under /assets/, content type, bytes)` of every embedded asset.
const ASSETS: &[(&str, &str, &str)] = &[
    ("app.js", JS, include_str!("../../../web/app.js")),
    ("list.js", JS, include_str!("../../../web/list.js")),
    ("signin.js", JS, include_str!("../../../web/signin.js")),
    ("options.js", JS, include_str!("../../../web/options.js")),
    ("keys.js", JS, include_str!("../../../web/keys.js")),
    ("phone.js", JS, include_str!("../../../web/phone.js")),
    ("files.js", JS, include_str!("../../../web/files.js")),
    ("past.js", JS, include_str!("../../../web/past.js")),
    ("app.css", CSS, include_str!("../../../web/app.css")),
    ("xterm.js", JS, include_str!("../../../web/vendor/xterm.js")),
    (
        "xterm.css",
        CSS,
        include_str!("../../../web/vendor/xterm.css"),
    ),
    vendored!("addon-fit.js"),
    vendored!("addon-webgl.js"),
    vendored!("addon-web-links.js"),
    vendored!("addon-clipboard.js"),
    vendored!("addon-unicode11.js"),
    vendored!("addon-image.js"),
];

/// web/index.html as build.rs wrote it: each asset named by its hash.
fn index_html() -> &'static str {
    encoded::index()
}
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// Scripts and styles from this origin only; xterm.js sets inline styles
/// on its elements, hence `'unsafe-inline'` for styles alone. The image
/// addon decodes sixel in WebAssembly it compiles from bytes inside its
/// own (same-origin) script: `'wasm-unsafe-eval'` allows exactly that
/// compile, not `eval` or `new Function` of strings. The WebGL renderer
/// needs nothing more (no worker, no blob: URL).
const CSP: &str = "default-src 'none'; script-src 'self' 'wasm-unsafe-eval'; \
                   style-src 'self' 'unsafe-inline'; \
                   connect-src 'self'; img-src 'self' data:; base-uri 'none'; \
                   form-action 'none'; frame-ancestors 'none'";

/// `GET /` and `GET /assets/{name}`: public, since they hold no secret
/// and the page itself signs in (`signin/`); everything it shows comes
/// from the authenticated API.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", routing::get(index))
        .route("/assets/{name}", routing::get(asset))
}

/// The page. The `serve --page-option` defaults come in a
/// `<meta name="tmux-engine-options">` holding their JSON; who the
/// visitor is, the page asks the API with its session.
async fn index(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let mut response = if state.config.page_options.is_empty() && state.config.node.is_none() {
        let (encoding, body) = encoded::page(&headers);
        let mut response = with_headers(body, "text/html; charset=utf-8");
        response.headers_mut().extend(encoding);
        response
    } else {
        let mut meta = format!(
            "<head>\n  <meta name=\"tmux-engine-options\" content=\"{}\">",
            escape_markup(&state.config.page_options.to_json())
        );
        // The nodes behind this origin: the page lists every one's terminals.
        if let Some(node) = &state.config.node {
            meta.push_str(&format!(
                "\n  <meta name=\"tmux-engine-nodes\" content=\"{}\">",
                escape_markup(&super::node::page_meta(node, &state.config.peer_nodes))
            ));
        }
        with_headers(
            index_html().replacen("<head>", &meta, 1),
            "text/html; charset=utf-8",
        )
    };
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// An asset by its name or its hashed name, precompressed when build.rs
/// made it (see [`encoded`]).
async fn asset(Path(name): Path<String>, headers: HeaderMap) -> Response {
    let (name, hashed) = encoded::resolve(&name).unwrap_or((name, false));
    match ASSETS.iter().find(|(asset, ..)| *asset == name) {
        Some((_, kind, body)) => encoded::serve(&name, hashed, body, &headers, |bytes| {
            with_headers(bytes, kind)
        }),
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}

fn with_headers(body: impl IntoResponse, kind: &'static str) -> Response {
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
    // The first URL carries a sign-in code: never hand it to another site.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}
