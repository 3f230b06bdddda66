//! The JSON routes under `/api/terminals`: each handler parses its request
//! into the verb layer's request type ([`crate::verbs`]), runs that verb and
//! answers with its answer type, the same JSON as the CLI's `--json` verbs
//! and the MCP tools. A route that names a terminal in its path takes it
//! from there (the body has no `terminal`). Errors become
//! `{"error":{"code","message"}}` with the status the protocol maps each
//! code to. Authentication happened before (the [`Principal`] extension);
//! this file only checks read-only. Which handler serves which path is
//! `openapi.rs`'s table, the one list of routes.

use axum::Extension;
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::AppState;
use super::auth::Principal;
use super::frames::form_pairs;
use crate::verbs::RenameRequest;
use crate::verbs::{
    self, ListRequest, ReadRequest, SearchRequest, SendRequest, SignalRequest, SpawnRequest,
    TerminalRequest,
};
use crate::{Error, ErrorCode};

/// An error answer: `{"error":{"code","message"}}` with its status.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    /// A 401 for a request without a valid token.
    pub fn unauthorized() -> ApiError {
        ApiError {
            status: StatusCode::UNAUTHORIZED,
            code: "UNAUTHORIZED",
            message: "a valid token or session is required (Authorization: Bearer)".to_owned(),
        }
    }

    /// An error with its own status and code (the front door's refusals).
    pub(crate) fn new(status: StatusCode, code: &'static str, message: String) -> ApiError {
        ApiError {
            status,
            code,
            message,
        }
    }

    /// The same error answered with another status.
    #[must_use]
    pub fn with_status(mut self, status: StatusCode) -> ApiError {
        self.status = status;
        self
    }

    fn read_only() -> ApiError {
        ApiError {
            status: StatusCode::FORBIDDEN,
            code: "READ_ONLY",
            message: "this token is read-only".to_owned(),
        }
    }

    fn invalid(message: String) -> ApiError {
        ApiError::from(Error::InvalidInput(message))
    }
}

impl From<Error> for ApiError {
    /// The protocol's status mapping. Another owner's terminal answers
    /// exactly like a missing one, so nobody learns that it exists.
    fn from(error: Error) -> ApiError {
        use ErrorCode as C;
        let code = match error.code() {
            C::ForeignTerminal => C::NoTerminal,
            code => code,
        };
        let status = match code {
            C::NoTerminal => StatusCode::NOT_FOUND,
            C::DuplicateName | C::SendActive | C::TerminalClosing => StatusCode::CONFLICT,
            C::InvalidInput => StatusCode::BAD_REQUEST,
            C::TerminalDead | C::WaitEnded => StatusCode::GONE,
            C::ReadOnly => StatusCode::FORBIDDEN,
            C::Timeout | C::Unresponsive => StatusCode::GATEWAY_TIMEOUT,
            C::RegistryDisposing => StatusCode::SERVICE_UNAVAILABLE,
            C::TooManyTerminals => StatusCode::TOO_MANY_REQUESTS,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let message = if code == C::NoTerminal {
            "no such terminal".to_owned()
        } else {
            error.to_string()
        };
        ApiError {
            status,
            code: code.as_str(),
            message,
        }
    }
}

/// An error answer's JSON: `{"error":{"code","message"}}`.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
pub(super) struct ErrorBody {
    /// The error.
    error: ErrorDetail,
}

/// The inside of an [`ErrorBody`].
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
struct ErrorDetail {
    /// The stable code, e.g. `NO_TERMINAL`, `INVALID_INPUT`.
    code: &'static str,
    /// What went wrong, for a person.
    message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message,
            },
        };
        (self.status, Json(body)).into_response()
    }
}

type Answer = Result<Response, ApiError>;

/// A JSON body (its `Content-Type` was checked at the front door,
/// `guard.rs`); too large is 413, anything unparsable 400, both as
/// `INVALID_INPUT`.
fn body<T: DeserializeOwned>(bytes: Result<Bytes, BytesRejection>) -> Result<T, ApiError> {
    let bytes = bytes.map_err(|rejection| ApiError {
        status: rejection.status(),
        code: "INVALID_INPUT",
        message: rejection.body_text(),
    })?;
    serde_json::from_slice(&bytes).map_err(|e| ApiError::invalid(format!("request body: {e}")))
}

/// A JSON body for the terminal the path names: the verb's request with
/// `terminal` taken from the path (a body naming one too is refused, so
/// the two cannot disagree).
fn targeted<T: DeserializeOwned>(
    bytes: Result<Bytes, BytesRejection>,
    target: String,
) -> Result<T, ApiError> {
    let Value::Object(mut fields) = body::<Value>(bytes)? else {
        return Err(ApiError::invalid(
            "request body: expected a JSON object".to_owned(),
        ));
    };
    if fields.contains_key("terminal") {
        return Err(ApiError::invalid(
            "request body: the terminal is named by the path, not by a terminal field".to_owned(),
        ));
    }
    fields.insert("terminal".to_owned(), Value::String(target));
    serde_json::from_value(Value::Object(fields))
        .map_err(|e| ApiError::invalid(format!("request body: {e}")))
}

fn writable(principal: &Principal) -> Result<(), ApiError> {
    if principal.read_only {
        return Err(ApiError::read_only());
    }
    Ok(())
}

fn ok(value: impl serde::Serialize) -> Answer {
    Ok(Json(value).into_response())
}

pub(super) async fn list(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
) -> Answer {
    ok(verbs::list(state.registry.owner(&who.owner), &ListRequest {}).await?)
}

/// How many viewers each of your terminals has in this `serve` (both
/// transports, the asking page's own included): the page's badge. Only
/// the caller's terminals are named, those without viewers as 0.
pub(super) async fn viewers(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
) -> Answer {
    let terminals = verbs::list(state.registry.owner(&who.owner), &ListRequest {}).await?;
    let counts: std::collections::BTreeMap<String, usize> = terminals
        .iter()
        .map(|t| (t.id.to_string(), state.attacher.viewers(&t.id)))
        .collect();
    ok(counts)
}

pub(super) async fn spawn(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    bytes: Result<Bytes, BytesRejection>,
) -> Answer {
    writable(&who)?;
    let request = body::<SpawnRequest>(bytes)?;
    // A spawn whose client went away still completes (hyper drops this
    // handler's future then, which would roll it back): the terminal is the
    // user's either way, and `list` shows it.
    let registry = state.registry.clone();
    let owner = who.owner.clone();
    let snapshot = tokio::spawn(async move { verbs::spawn(registry.owner(&owner), request).await })
        .await
        .unwrap_or_else(|failed| match failed.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(_) => Err(Error::Cancelled(
                "spawn: the server is shutting down".to_owned(),
            )),
        })?;
    Ok((StatusCode::CREATED, Json(snapshot)).into_response())
}

pub(super) async fn show(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    Path(terminal): Path<String>,
) -> Answer {
    ok(verbs::show(
        state.registry.owner(&who.owner),
        &TerminalRequest { terminal },
    )
    .await?)
}

pub(super) async fn kill(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    Path(terminal): Path<String>,
) -> Answer {
    writable(&who)?;
    // Looked up first, so a read-write token of another owner gets 404.
    ok(verbs::kill(
        state.registry.owner(&who.owner),
        &TerminalRequest { terminal },
    )
    .await?)
}

pub(super) async fn signal(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    Path(target): Path<String>,
    bytes: Result<Bytes, BytesRejection>,
) -> Answer {
    writable(&who)?;
    let request = targeted::<SignalRequest>(bytes, target)?;
    ok(verbs::signal(state.registry.owner(&who.owner), &request).await?)
}

pub(super) async fn rename(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    Path(target): Path<String>,
    bytes: Result<Bytes, BytesRejection>,
) -> Answer {
    writable(&who)?;
    let request = targeted::<RenameRequest>(bytes, target)?;
    ok(verbs::rename(state.registry.owner(&who.owner), &request).await?)
}

pub(super) async fn screen(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    Path(terminal): Path<String>,
) -> Answer {
    ok(verbs::screen(
        state.registry.owner(&who.owner),
        &TerminalRequest { terminal },
    )
    .await?)
}

/// `GET .../scrollback?offset=N&count=N`: the read request from the query
/// (`token` is authentication's; anything else is refused).
pub(super) async fn scrollback(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    Path(terminal): Path<String>,
    RawQuery(query): RawQuery,
) -> Answer {
    let mut request = ReadRequest {
        terminal,
        ..ReadRequest::default()
    };
    for (key, value) in form_pairs(query.as_deref().unwrap_or("")) {
        let number = || {
            value
                .parse::<usize>()
                .map_err(|_| ApiError::invalid(format!("{key} {value:?} is not a count")))
        };
        match key.as_str() {
            "offset" => request.offset = number()?,
            "count" => request.count = Some(number()?),
            "max_bytes" => request.max_bytes = Some(number()?),
            "max_lines" => request.max_lines = Some(number()?),
            "since" => request.since = Some(value.clone()),
            "format" => {
                request.format = Some(
                    serde_json::from_value(serde_json::Value::String(value.clone())).map_err(
                        |_| {
                            ApiError::invalid(format!(
                                "format {value:?} is not lines, text or bytes"
                            ))
                        },
                    )?,
                );
            }
            "token" => {}
            _ => {
                return Err(ApiError::invalid(format!(
                    "unknown query parameter {key:?}"
                )));
            }
        }
    }
    ok(verbs::read(state.registry.owner(&who.owner), request).await?)
}

/// `GET .../commands?limit=N`: the terminal's last commands (`token` is
/// authentication's; anything else is refused).
pub(super) async fn commands(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    Path(terminal): Path<String>,
    RawQuery(query): RawQuery,
) -> Answer {
    let mut request = verbs::CommandsRequest {
        terminal,
        limit: None,
    };
    for (key, value) in form_pairs(query.as_deref().unwrap_or("")) {
        match key.as_str() {
            "limit" => {
                request.limit =
                    Some(value.parse().map_err(|_| {
                        ApiError::invalid(format!("limit {value:?} is not a count"))
                    })?);
            }
            "token" => {}
            _ => {
                return Err(ApiError::invalid(format!(
                    "unknown query parameter {key:?}"
                )));
            }
        }
    }
    ok(verbs::commands(state.registry.owner(&who.owner), &request).await?)
}

/// `GET /api/search?regex=R&terminal=T&context=N&max_matches=N&max_bytes=N`:
/// the search request from the query (`token` is authentication's).
pub(super) async fn search(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    RawQuery(query): RawQuery,
) -> Answer {
    let mut request = SearchRequest::default();
    let mut regex = None;
    for (key, value) in form_pairs(query.as_deref().unwrap_or("")) {
        let number = || {
            value
                .parse::<usize>()
                .map_err(|_| ApiError::invalid(format!("{key} {value:?} is not a count")))
        };
        match key.as_str() {
            "regex" => regex = Some(value.clone()),
            "terminal" => request.terminal = Some(value.clone()),
            "context" => request.context = Some(number()?),
            "max_matches" => request.max_matches = Some(number()?),
            "max_bytes" => request.max_bytes = Some(number()?),
            "token" => {}
            _ => {
                return Err(ApiError::invalid(format!(
                    "unknown query parameter {key:?}"
                )));
            }
        }
    }
    request.regex = regex.ok_or_else(|| ApiError::invalid("regex is required".to_owned()))?;
    ok(verbs::search(state.registry.owner(&who.owner), &request).await?)
}

/// `POST .../send`: waits `idle` unless the body says otherwise (the
/// CLI's default too).
pub(super) async fn send(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    Path(target): Path<String>,
    bytes: Result<Bytes, BytesRejection>,
) -> Answer {
    writable(&who)?;
    let request = targeted::<SendRequest>(bytes, target)?;
    let sending = verbs::send(state.registry.owner(&who.owner), request).await?;
    ok(sending.answer().await?)
}
