//! A share link's holder (`tmux-engine link --terminal T`): one terminal,
//! nothing else. The middleware lets such a session reach only that
//! terminal's routes: the verbs whose entry says `Shared::Terminal` (show,
//! screen, scrollback, commands, send, signal), its viewer, and its files
//! only when the link grants them (`--files`: a holder who may type into a
//! `less` or a TUI has no shell, so moving any file the server's user can
//! read would be more than typing gives); its own session, the document,
//! and the list (`Shared::Filtered`) and viewer counts filtered to that
//! terminal. Everything else is `403 FORBIDDEN_SCOPE`, another terminal
//! `404 NO_TERMINAL` as if it did not exist. No registry logic: a name is
//! resolved through the owner's `show`, as every route does.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::AppState;
use super::api::ApiError;
use super::auth::Principal;
use crate::Error;
use crate::verbs::{Shared, VERBS};

/// The one terminal a share link's session may use, and its grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scope {
    /// The terminal's id.
    pub(crate) terminal: String,
    /// The link grants moving files (`--files`).
    pub(crate) files: bool,
}

/// What to do with the answer of an allowed request.
pub(super) enum Filter {
    /// Nothing.
    Pass,
    /// Keep only the scope's entry of the list.
    List,
    /// Keep only the scope's viewer count.
    Viewers,
}

fn forbidden(scope: &Scope) -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "FORBIDDEN_SCOPE",
        format!("this link is for terminal {} only", scope.terminal),
    )
}

/// Whether `target` (an id or a name) is the scope's terminal.
pub(super) async fn is_scope(
    state: &AppState,
    who: &Principal,
    scope: &Scope,
    target: &str,
) -> bool {
    if target == scope.terminal {
        return true;
    }
    state
        .registry
        .owner(&who.owner)
        .show(target)
        .await
        .is_ok_and(|snapshot| snapshot.id.as_str() == scope.terminal)
}

/// Judges one request of a scoped session: a verb's route by the verb's
/// `shared`, the bridge's own by the list here.
///
/// # Errors
/// `403 FORBIDDEN_SCOPE` for a route outside the terminal, `404
/// NO_TERMINAL` for another terminal, kill and rename included.
pub(super) async fn judge(
    state: &AppState,
    who: &Principal,
    scope: &Scope,
    method: &Method,
    path: &str,
) -> Result<Filter, ApiError> {
    let method = method.as_str();
    match (method, path) {
        (_, "/api/session") | ("GET", "/api/openapi.json") => return Ok(Filter::Pass),
        ("GET", "/api/viewers") => return Ok(Filter::Viewers),
        _ => {}
    }
    let shared = VERBS
        .iter()
        .find(|verb| {
            verb.route
                .is_some_and(|route| route.method == method && fits(route.path, path))
        })
        .map_or(Shared::No, |verb| verb.shared);
    let Some(rest) = path.strip_prefix("/api/terminals/") else {
        return match shared {
            Shared::Filtered => Ok(Filter::List),
            Shared::Terminal | Shared::No => Err(forbidden(scope)),
        };
    };
    let (target, tail) = rest.split_once('/').unwrap_or((rest, ""));
    // The bridge's own routes of a terminal: its viewer, its files.
    let files = matches!((method, tail), ("GET" | "PUT", "files"));
    let allowed = files || (method, tail) == ("GET", "attach") || shared == Shared::Terminal;
    if !is_scope(state, who, scope, target).await {
        return Err(ApiError::from(Error::NoTerminal(target.to_owned())));
    }
    if !allowed {
        return Err(forbidden(scope));
    }
    if files && !scope.files {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "FORBIDDEN_SCOPE",
            format!(
                "this link for terminal {} moves no files: the owner grants that with \
                 `link --terminal T --files`",
                scope.terminal
            ),
        ));
    }
    Ok(Filter::Pass)
}

/// Whether `path` is one of `route`'s (axum's syntax: `{t}` stands for
/// one segment).
fn fits(route: &str, path: &str) -> bool {
    let mut route = route.split('/');
    let mut path = path.split('/');
    loop {
        match (route.next(), path.next()) {
            (None, None) => return true,
            (Some(want), Some(got)) if want == got => {}
            (Some(want), Some(got)) if want.starts_with('{') && !got.is_empty() => {}
            _ => return false,
        }
    }
}

/// Applies `filter` to a JSON answer.
pub(super) async fn filter(filter: Filter, scope: &Scope, response: Response) -> Response {
    if matches!(filter, Filter::Pass) || !response.status().is_success() {
        return response;
    }
    let (parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 << 20).await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let Ok(mut value) = serde_json::from_slice::<Value>(&bytes) else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    match (&filter, &mut value) {
        (Filter::List, Value::Array(list)) => list.retain(|t| t["id"] == scope.terminal.as_str()),
        (Filter::Viewers, Value::Object(counts)) => counts.retain(|id, _| *id == scope.terminal),
        _ => {}
    }
    let mut response = Response::from_parts(parts, Body::from(value.to_string()));
    response
        .headers_mut()
        .remove(axum::http::header::CONTENT_LENGTH);
    response
}

#[cfg(test)]
mod tests {
    use super::fits;

    /// A route's `{t}` stands for one segment, never none or two.
    #[test]
    fn a_path_fits_its_route() {
        let route = "/api/terminals/{t}/screen";
        assert!(fits(route, "/api/terminals/t-1/screen"));
        assert!(fits("/api/terminals/{t}", "/api/terminals/build"));
        assert!(fits("/api/terminals", "/api/terminals"));
        for path in [
            "/api/terminals//screen",
            "/api/terminals/t-1/screen/x",
            "/api/terminals/t-1/scrollback",
            "/api/terminals/t-1",
            "/api/terminals/",
        ] {
            assert!(!fits(route, path), "{path}");
        }
        assert!(!fits("/api/terminals/{t}", "/api/terminals/t-1/"));
    }
}
