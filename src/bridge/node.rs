//! Many hosts behind one front door (`serve --node NAME`): every terminal
//! id this serve answers carries its node, `NAME.t-…`, and so do its links
//! (`#code=…&node=NAME`), so a stateless proxy routes a request by the id
//! in its path (or by the `X-Tmux-Engine-Node` header, or by the node's
//! path prefix) without asking anyone where a terminal lives. Inside,
//! nothing changes: the registry keeps its plain ids; this layer adds the
//! node on the way out and takes it off on the way in. A terminal names
//! never hold a `.` (`vocab::validate_name`), so `NAME.` can only be a
//! node. `--peer-node NAME=PATH` tells the page where the other nodes are
//! mounted behind the same origin, so it lists and opens theirs too.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::AppState;
use super::api::ApiError;
use crate::vocab::TerminalId;
use crate::{Error, Result};

/// The longest node name, in bytes (a DNS label's).
const MAX_NODE_LEN: usize = 63;

/// Another node behind the same origin: its name and the path its serve
/// is mounted at (`/nodes/b/`), always ending in `/`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PeerNode {
    /// The node's name, as its serve's `--node`.
    pub name: String,
    /// Where its page, API and WebSocket are, from the origin's root.
    pub path: String,
}

impl PeerNode {
    /// Parses `--peer-node NAME=PATH`.
    ///
    /// # Errors
    /// `INVALID_INPUT` for a bad name or a path that is not `/…` of plain
    /// URL path characters.
    pub fn parse(spec: &str) -> Result<PeerNode> {
        let Some((name, path)) = spec.split_once('=') else {
            return Err(Error::InvalidInput(format!(
                "--peer-node {spec:?}: expected NAME=PATH, e.g. b=/nodes/b/"
            )));
        };
        check_node_name(name)?;
        let plain = path.starts_with('/')
            && !path.starts_with("//")
            && path
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/-._~".contains(&b));
        if !plain || path.split('/').any(|part| part == "..") {
            return Err(Error::InvalidInput(format!(
                "--peer-node {spec:?}: PATH must start with / and hold only letters, digits, \
                 '/', '-', '.', '_' and '~'"
            )));
        }
        let path = if path.ends_with('/') {
            path.to_owned()
        } else {
            format!("{path}/")
        };
        Ok(PeerNode {
            name: name.to_owned(),
            path,
        })
    }
}

/// Checks a node name: 1-63 of `a-z`, `0-9` and `-`, not starting with
/// `-` (a DNS label, so it fits a host name, a path and a header alike).
///
/// # Errors
/// `INVALID_INPUT` naming the rule it breaks.
pub fn check_node_name(name: &str) -> Result<()> {
    let valid = !name.is_empty()
        && name.len() <= MAX_NODE_LEN
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(Error::InvalidInput(format!(
            "node name {name:?}: 1-{MAX_NODE_LEN} of a-z, 0-9 and '-', not starting with '-'"
        )))
    }
}

/// `NODE.ID`: a terminal id as this node answers it.
pub(crate) fn qualify(node: &str, id: &str) -> String {
    format!("{node}.{id}")
}

/// A terminal as a client named it, without this node's prefix: `a.t-…`
/// on node `a` is `t-…`; a name or a plain id is as given. Another
/// node's id is no terminal here (404 `NO_TERMINAL`, saying whose it is:
/// the proxy routed it wrong).
fn local<'a>(node: &str, given: &'a str) -> std::result::Result<&'a str, ApiError> {
    match given.split_once('.') {
        Some((prefix, rest)) if prefix == node => Ok(rest),
        Some((prefix, _)) => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "NO_TERMINAL",
            format!("terminal {given:?} is on node {prefix:?}, not on this node ({node:?})"),
        )),
        None => Ok(given),
    }
}

/// A link's path (`/#code=…`) as this node hands it out: the node in the
/// fragment, so a page at any node of the front door signs in at this one.
pub(crate) fn qualify_link(node: &str, path: &str) -> String {
    format!("{path}&node={node}")
}

/// The middleware around the whole router (before routing, so the path's
/// `{t}` is the registry's): takes this node's prefix off the path's
/// terminal, a `terminal=` query and a share link's `terminal`, then puts
/// it on every terminal id and link path of a JSON answer.
pub(crate) async fn qualify_ids(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let Some(node) = state.config.node.clone() else {
        return next.run(request).await;
    };
    let request = match unqualify_request(&node, request).await {
        Ok(request) => request,
        Err(refusal) => return refusal.into_response(),
    };
    let response = next.run(request).await;
    qualify_response(&node, response).await
}

async fn unqualify_request(node: &str, request: Request) -> std::result::Result<Request, ApiError> {
    let (mut parts, body) = request.into_parts();
    let path = parts.uri.path();
    let mut changed = None;
    if let Some(rest) = path.strip_prefix("/api/terminals/") {
        let (terminal, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let plain = local(node, terminal)?;
        if plain.len() != terminal.len() {
            changed = Some(format!("/api/terminals/{plain}{tail}"));
        }
    }
    let query = parts.uri.query().map(str::to_owned);
    let mut new_query = None;
    if let Some(query) = &query
        && query.contains("terminal=")
    {
        let mut pairs = Vec::new();
        for pair in query.split('&') {
            match pair.strip_prefix("terminal=") {
                Some(terminal) => pairs.push(format!("terminal={}", local(node, terminal)?)),
                None => pairs.push(pair.to_owned()),
            }
        }
        new_query = Some(pairs.join("&"));
    }
    if changed.is_some() || new_query.is_some() {
        let path = changed.unwrap_or_else(|| parts.uri.path().to_owned());
        let query = new_query.or(query);
        let whole = match query {
            Some(query) => format!("{path}?{query}"),
            None => path,
        };
        let mut uri = parts.uri.clone().into_parts();
        uri.path_and_query = whole.parse().ok();
        if let Ok(uri) = Uri::from_parts(uri) {
            parts.uri = uri;
        }
    }
    let json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|kind| kind.starts_with("application/json"));
    // The one body that names a terminal is a share link's (`POST
    // /api/links`): only it is read here, before authentication, and only
    // when its length is announced within the bound; any other is the inner
    // router's to judge (401, 413, 400), unread.
    let announced = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<usize>().ok());
    let links = parts.method == axum::http::Method::POST && parts.uri.path() == "/api/links";
    if !json || !links || announced.is_none_or(|length| length > super::MAX_BODY) {
        return Ok(Request::from_parts(parts, body));
    }
    let bytes = axum::body::to_bytes(body, super::MAX_BODY)
        .await
        .map_err(|e| ApiError::from(Error::InvalidInput(format!("request body: {e}"))))?;
    let bytes = match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(mut fields)) => match fields.get("terminal").and_then(Value::as_str) {
            Some(terminal) if terminal.contains('.') => {
                let plain = local(node, terminal)?.to_owned();
                fields.insert("terminal".to_owned(), Value::String(plain));
                parts.headers.remove(header::CONTENT_LENGTH);
                serde_json::to_vec(&fields).map_or(bytes, axum::body::Bytes::from)
            }
            _ => bytes,
        },
        _ => bytes,
    };
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

async fn qualify_response(node: &str, response: Response) -> Response {
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|kind| kind.starts_with("application/json"));
    if !json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "reading an answer").into_response();
    };
    let Ok(mut value) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    qualify_value(node, &mut value);
    let bytes = serde_json::to_vec(&value).unwrap_or_else(|_| bytes.to_vec());
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, Body::from(bytes))
}

/// Puts `node` on every terminal id in `value`: the values of `id` and
/// `terminal` fields and the keys (`/api/viewers`) that have a terminal
/// id's form, and on a link's `path`.
pub(crate) fn qualify_value(node: &str, value: &mut Value) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(|item| qualify_value(node, item)),
        Value::Object(fields) => {
            let keyed: Vec<String> = fields
                .keys()
                .filter(|key| TerminalId::parse(key).is_ok())
                .cloned()
                .collect();
            for key in keyed {
                if let Some(inner) = fields.remove(&key) {
                    fields.insert(qualify(node, &key), inner);
                }
            }
            for (key, inner) in fields.iter_mut() {
                match inner {
                    Value::String(text)
                        if (key == "id" || key == "terminal")
                            && TerminalId::parse(text).is_ok() =>
                    {
                        *text = qualify(node, text);
                    }
                    Value::String(text) if key == "path" && text.starts_with("/#code=") => {
                        *text = qualify_link(node, text);
                    }
                    _ => qualify_value(node, inner),
                }
            }
        }
        _ => {}
    }
}

/// What the page is told about the nodes (its `<meta
/// name="tmux-engine-nodes">`): its own and the peers'.
pub(crate) fn page_meta(node: &str, peers: &[PeerNode]) -> String {
    serde_json::json!({ "node": node, "peers": peers }).to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn names_and_peers() {
        for good in ["a", "node-1", "x9"] {
            check_node_name(good).unwrap();
        }
        for bad in ["", "-a", "A", "a.b", "a_b", &"a".repeat(64)] {
            assert!(check_node_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            PeerNode::parse("b=/nodes/b").unwrap(),
            PeerNode {
                name: "b".to_owned(),
                path: "/nodes/b/".to_owned()
            }
        );
        for bad in [
            "b",
            "b=nodes/b",
            "b=//evil/",
            "b=/a/../c/",
            "b=/x\"y/",
            "B=/b/",
        ] {
            assert!(PeerNode::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ids_in_and_out() {
        let id = "t-18c0a0b0c0d-0123456789abcdef";
        assert_eq!(local("a", &format!("a.{id}")).unwrap(), id);
        assert_eq!(local("a", "build").unwrap(), "build");
        assert!(local("a", &format!("b.{id}")).is_err());
        let mut value = serde_json::json!([
            {"id": id, "name": "build", "text": id},
            {id: 2},
            {"path": "/#code=XYZ", "terminal": id, "id": "link-1"}
        ]);
        qualify_value("a", &mut value);
        let qualified = format!("a.{id}");
        assert_eq!(value[0]["id"], qualified.as_str());
        assert_eq!(value[0]["text"], id, "only id fields");
        assert_eq!(value[1][qualified.as_str()], 2);
        assert_eq!(value[2]["path"], "/#code=XYZ&node=a");
        assert_eq!(value[2]["terminal"], qualified.as_str());
        assert_eq!(value[2]["id"], "link-1");
    }
}
