//! The page: `GET /` and its assets, compiled into the binary from `web/`
//! (the project's own JS/CSS) and `web/vendor/` (xterm.js and its addons:
//! fit, webgl, web-links, clipboard, unicode11, image; vendored at pinned
//! versions by `scripts/vendor-web`). Nothing is fetched at run time and
//! nothing is read from disk. `serve --page-option` defaults reach the
//! page in a `<meta name="tmux-engine-options">` (see [`PageOptions`]).

mod options;

pub use self::options::PageOptions;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use axum::{Router, routing};
use serde::Deserialize;
use serde_json::json;

use super::AppState;
use super::api::ApiError;
use super::auth::{Principal, cookie, query_token};
use crate::Error;

/// A vendored script, served under its own name.
macro_rules! vendored {
    ($name:literal) => {
        ($name, JS, include_str!(concat!("../../web/vendor/", $name)))
    };
}

/// `(name under /assets/, content type, bytes)` of every embedded asset.
const ASSETS: &[(&str, &str, &str)] = &[
    ("app.js", JS, include_str!("../../web/app.js")),
    ("options.js", JS, include_str!("../../web/options.js")),
    ("keys.js", JS, include_str!("../../web/keys.js")),
    ("app.css", CSS, include_str!("../../web/app.css")),
    ("xterm.js", JS, include_str!("../../web/vendor/xterm.js")),
    ("xterm.css", CSS, include_str!("../../web/vendor/xterm.css")),
    vendored!("addon-fit.js"),
    vendored!("addon-webgl.js"),
    vendored!("addon-web-links.js"),
    vendored!("addon-clipboard.js"),
    vendored!("addon-unicode11.js"),
    vendored!("addon-image.js"),
];

const INDEX: &str = include_str!("../../web/index.html");
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

/// `GET /`, `POST /` (the page switching its cookie) and
/// `GET /assets/{name}` (all behind authentication).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", routing::get(index).post(switch))
        .route("/assets/{name}", routing::get(asset))
}

/// What a `?token=` load does to the cookie.
#[derive(Debug, PartialEq, Eq)]
enum Keep {
    /// Set the link's token as the cookie.
    Link,
    /// Keep the cookie, which is valid for another owner: the page asks
    /// the user (`current` is signed in, the link is for `link`).
    Ask { current: String, link: String },
    /// Nothing to set.
    Cookie,
}

/// A link's valid token becomes the cookie unless the cookie already
/// holds a valid token of another owner: a link someone sent must not
/// silently sign the user in as them (and see what the user types).
fn keep(link: Option<&Principal>, current: Option<&Principal>) -> Keep {
    match (link, current) {
        (None, _) => Keep::Cookie,
        (Some(link), Some(current)) if link.owner != current.owner => Keep::Ask {
            current: current.owner.as_str().to_owned(),
            link: link.owner.as_str().to_owned(),
        },
        (Some(_), _) => Keep::Link,
    }
}

/// The page. Loaded with `?token=`, it also sets the cookie that carries
/// the token from then on (the page's script then drops it from the URL),
/// unless [`keep`] says to ask: then the page gets a
/// `<meta name="tmux-engine-switch">` naming both owners, and its script
/// offers the switch (`POST /`). The `serve --page-option` defaults come
/// in a `<meta name="tmux-engine-options">` holding their JSON, and a
/// read-only principal gets `<meta name="tmux-engine-access">`.
async fn index(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    let query = query.unwrap_or_default();
    let token = query_token(&query);
    // Only a token that is valid by itself counts (the request may have
    // been let in by another carrier), and only tokens become cookies.
    let link = token
        .as_ref()
        .and_then(|_| state.auth.authenticate(&HeaderMap::new(), &query))
        .filter(|_| matches!(*state.auth, super::Auth::Tokens(_)));
    let current = state.auth.cookie_principal(&headers);
    let decision = keep(link.as_ref(), current.as_ref());
    let mut metas = String::new();
    if let Keep::Ask { current, link } = &decision {
        metas.push_str(&format!(
            "\n  <meta name=\"tmux-engine-switch\" content=\"{}\" data-link=\"{}\">",
            escape(current),
            escape(link)
        ));
    }
    // The page hides what a read-only token may not do (the API refuses
    // it anyway).
    if who.read_only {
        metas.push_str("\n  <meta name=\"tmux-engine-access\" content=\"read-only\">");
    }
    if !state.config.page_options.is_empty() {
        metas.push_str(&format!(
            "\n  <meta name=\"tmux-engine-options\" content=\"{}\">",
            escape(&state.config.page_options.to_json())
        ));
    }
    let mut response = if metas.is_empty() {
        with_headers(INDEX, "text/html; charset=utf-8")
    } else {
        with_headers(
            INDEX.replacen("<head>", &format!("<head>{metas}"), 1),
            "text/html; charset=utf-8",
        )
    };
    if decision == Keep::Link
        && let Some(token) = token
    {
        set_cookie(&state, &mut response, &token);
    }
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `POST /`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SwitchBody {
    token: String,
}

/// `POST / {"token"}`: the page's answer to its switch notice; the token
/// becomes the cookie. A POST, so the front door's rules hold: only the
/// page's own origin can send it (a link, a form or another port cannot),
/// and the cookie-only rule asks for its `Origin`.
async fn switch(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let bytes = body.map_err(|rejection| {
        ApiError::from(Error::InvalidInput(rejection.body_text())).with_status(rejection.status())
    })?;
    let SwitchBody { token } = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::from(Error::InvalidInput(format!("request body: {e}"))))?;
    let mut bearer = HeaderMap::new();
    let principal = HeaderValue::from_str(&format!("Bearer {token}"))
        .ok()
        .and_then(|value| {
            bearer.insert(header::AUTHORIZATION, value);
            state.auth.authenticate(&bearer, "")
        })
        .filter(|_| matches!(*state.auth, super::Auth::Tokens(_)))
        .ok_or_else(ApiError::unauthorized)?;
    let mut response = Json(json!({"owner": principal.owner.as_str()})).into_response();
    set_cookie(&state, &mut response, &token);
    Ok(response)
}

fn set_cookie(state: &AppState, response: &mut Response, token: &str) {
    let value = cookie(token, &state.config.base_path, state.config.https);
    if let Ok(value) = HeaderValue::from_str(&value) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
}

/// Text safe inside an HTML attribute (owner ids may hold anything but
/// control characters).
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|(asset, ..)| *asset == name) {
        Some((_, kind, body)) => with_headers(*body, kind),
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
    // The first URL carries the token: never hand it to another site.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::registry::OwnerId;

    fn principal(owner: &str, read_only: bool) -> Principal {
        Principal {
            owner: OwnerId::new(owner).unwrap(),
            read_only,
        }
    }

    #[test]
    fn a_link_never_replaces_another_owners_cookie() {
        let (alice, bob) = (principal("alice", false), principal("bob", false));
        let alice_looks = principal("alice", true);
        assert_eq!(keep(None, None), Keep::Cookie);
        assert_eq!(keep(None, Some(&alice)), Keep::Cookie);
        assert_eq!(keep(Some(&alice), None), Keep::Link);
        assert_eq!(keep(Some(&alice_looks), Some(&alice)), Keep::Link);
        assert_eq!(
            keep(Some(&bob), Some(&alice)),
            Keep::Ask {
                current: "alice".to_owned(),
                link: "bob".to_owned()
            }
        );
        assert_eq!(escape(r#"a"<b>&'"#), "a&quot;&lt;b&gt;&amp;&#39;");
    }
}
