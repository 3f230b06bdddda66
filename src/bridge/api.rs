//! The JSON routes of the verbs: one handler for every entry of the verb
//! table ([`crate::verbs::VERBS`]) that has a route. It reads the verb's
//! arguments (a `POST`'s JSON body, a `GET`'s or `DELETE`'s query, the
//! terminal from the path's `{t}`), parses them into the verb's request
//! type (serde, as every face: no field is parsed by hand here), runs the
//! verb and answers with its answer, the same JSON as the CLI's `--json`
//! and the MCP tools. Errors become `{"error":{"code","message"}}` with the
//! status the protocol maps each code to. Authentication happened before
//! (the [`Principal`] extension); this file only checks read-only. Which
//! handler serves which path is `openapi/`'s table.

use axum::Extension;
use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{RawPathParams, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{self, MethodRouter};
use serde_json::Value;

use super::AppState;
use super::auth::Principal;
use super::frames::form_pairs;
use crate::verbs::{self, Arguments, ListRequest, Route, Verb};
use crate::{Error, ErrorCode};

/// An error answer: `{"error":{"code","message"}}` with its status.
#[derive(Debug)]
pub(crate) struct ApiError {
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

/// The arguments a JSON body carries (its `Content-Type` was checked at
/// the front door, `guard.rs`); too large is 413, anything but an object
/// 400, both as `INVALID_INPUT`.
pub(super) fn body(bytes: Result<Bytes, BytesRejection>) -> Result<Arguments, ApiError> {
    let bytes = bytes.map_err(|rejection| ApiError {
        status: rejection.status(),
        code: "INVALID_INPUT",
        message: rejection.body_text(),
    })?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(fields)) => Ok(Arguments::Json(fields)),
        Ok(_) => Err(ApiError::invalid(
            "request body: expected a JSON object".to_owned(),
        )),
        Err(e) => Err(ApiError::invalid(format!("request body: {e}"))),
    }
}

/// The handler of `verb` at `route`: the arguments from the body or the
/// query (`token` in a query is authentication's business, never an
/// argument) and the path's terminal, a read-only token refused before
/// anything is looked up (so another owner's terminal is 404 either way).
pub(super) fn handler(verb: &'static Verb, route: Route) -> MethodRouter<AppState> {
    let handle = move |State(state): State<AppState>,
                       Extension(who): Extension<Principal>,
                       via: Option<Extension<super::Via>>,
                       path: RawPathParams,
                       RawQuery(query): RawQuery,
                       bytes: Result<Bytes, BytesRejection>| async move {
        let began = std::time::Instant::now();
        let mut audited = Audited::default();
        let answer = run(verb, route, &state, &who, path, query, bytes, &mut audited).await;
        // What changed a terminal is on the record: who, which, how many
        // bytes typed (never the text).
        if !verb.read_only && answer.is_ok() {
            let via = via.map_or("token", |Extension(via)| via.0);
            let mut act = crate::audit::Act::new(verb.name, who.owner.as_str()).via(via);
            if let Some(terminal) = audited.terminal {
                act = act.terminal(terminal);
            }
            if let Some(bytes) = audited.bytes {
                act = act.bytes(bytes);
            }
            state.audit(act);
        }
        state
            .metrics
            .verb(verb.name, answer.is_ok(), began.elapsed());
        answer
    };
    match route.method {
        "POST" => routing::post(handle),
        "DELETE" => routing::delete(handle),
        _ => routing::get(handle),
    }
}

/// What a call tells the audit log.
#[derive(Default)]
struct Audited {
    /// The terminal: the path's, else the answer's `id` (a spawn's).
    terminal: Option<String>,
    /// The length of the text typed (a send's).
    bytes: Option<u64>,
}

/// One call of `verb` (see [`handler`]).
#[allow(clippy::too_many_arguments)]
async fn run(
    verb: &'static Verb,
    route: Route,
    state: &AppState,
    who: &Principal,
    path: RawPathParams,
    query: Option<String>,
    bytes: Result<Bytes, BytesRejection>,
    audited: &mut Audited,
) -> Answer {
    if !verb.read_only && who.read_only {
        return Err(ApiError::read_only());
    }
    let mut arguments = if route.method == "POST" {
        body(bytes)?
    } else {
        let query = query.unwrap_or_default();
        Arguments::Query(
            form_pairs(&query)
                .filter(|(key, _)| key != "token")
                .collect(),
        )
    };
    if let Some((_, terminal)) = path.iter().find(|(name, _)| *name == "t") {
        audited.terminal = Some(terminal.to_owned());
        arguments = arguments.with_terminal(terminal.to_owned())?;
    }
    audited.bytes = arguments.text_len();
    // A read-only principal's read or wait never recreates a dead
    // `on-attach` terminal: that would start its program.
    let owned = state.registry.owner(&who.owner);
    let owned = if who.read_only {
        owned.read_only()
    } else {
        owned
    };
    if let Some(encode) = verb.encode {
        return Ok(encoded(encode(owned, arguments).await?));
    }
    let answer = if verb.detached {
        detached(verb, state, who, arguments).await?
    } else {
        (verb.run)(owned, arguments).await?
    };
    if audited.terminal.is_none() {
        audited.terminal = answer.get("id").and_then(Value::as_str).map(str::to_owned);
    }
    let status = StatusCode::from_u16(route.status).unwrap_or(StatusCode::OK);
    Answer::Ok((status, Json(answer)).into_response())
}

/// An answer the verb wrote as JSON text itself (see `Verb::encode`).
fn encoded(body: Vec<u8>) -> Response {
    let json = axum::http::HeaderValue::from_static("application/json");
    ([(axum::http::header::CONTENT_TYPE, json)], body).into_response()
}

/// Runs `verb` in a task of its own (`Verb::detached`): a spawn whose
/// client went away still completes (hyper drops the handler's future
/// then, which would roll it back): the terminal is the user's either
/// way, and `list` shows it.
async fn detached(
    verb: &'static Verb,
    state: &AppState,
    who: &Principal,
    arguments: Arguments,
) -> crate::Result<Value> {
    let registry = state.registry.clone();
    let owner = who.owner.clone();
    let read_only = who.read_only;
    tokio::spawn(async move {
        let owned = registry.owner(&owner);
        let owned = if read_only { owned.read_only() } else { owned };
        (verb.run)(owned, arguments).await
    })
    .await
    .unwrap_or_else(|failed| match failed.try_into_panic() {
        Ok(panic) => std::panic::resume_unwind(panic),
        Err(_) => Err(Error::Cancelled(format!(
            "{}: the server is shutting down",
            verb.name
        ))),
    })
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
    Ok(Json(counts).into_response())
}
