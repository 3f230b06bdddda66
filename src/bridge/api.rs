//! The JSON routes under `/api/terminals`: each handler turns a request
//! into one registry call and answers with the same JSON objects as the
//! CLI's `--json` verbs. Errors become `{"error":{"code","message"}}` with
//! the status the protocol maps each code to. Authentication happened
//! before (the [`Principal`] extension); this file only checks read-only.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router, routing};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::AppState;
use super::auth::Principal;
use super::frames::form_pairs;
use crate::Error;
use crate::registry::{ReadRequest, RestartPolicy, SendRequest, Signal, SpawnSpec, WaitFor};

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
            message:
                "a valid token is required (Authorization: Bearer, ?token= or the page's cookie)"
                    .to_owned(),
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
        let (status, code) = match error.code() {
            "NO_TERMINAL" | "FOREIGN_TERMINAL" => (StatusCode::NOT_FOUND, "NO_TERMINAL"),
            code @ ("DUPLICATE_NAME" | "SEND_ACTIVE" | "TERMINAL_CLOSING") => {
                (StatusCode::CONFLICT, code)
            }
            code @ "INVALID_INPUT" => (StatusCode::BAD_REQUEST, code),
            code @ ("TERMINAL_DEAD" | "WAIT_ENDED") => (StatusCode::GONE, code),
            code @ "READ_ONLY" => (StatusCode::FORBIDDEN, code),
            code @ ("TIMEOUT" | "UNRESPONSIVE") => (StatusCode::GATEWAY_TIMEOUT, code),
            code @ "REGISTRY_DISPOSING" => (StatusCode::SERVICE_UNAVAILABLE, code),
            code => (StatusCode::INTERNAL_SERVER_ERROR, code),
        };
        let message = if code == "NO_TERMINAL" {
            "no such terminal".to_owned()
        } else {
            error.to_string()
        };
        ApiError {
            status,
            code,
            message,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"code": self.code, "message": self.message}});
        (self.status, Json(body)).into_response()
    }
}

type Answer = Result<Response, ApiError>;

/// The routes under `/api/terminals` (the WebSocket route is `ws.rs`'s).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/terminals", routing::get(list).post(spawn))
        .route("/api/terminals/{t}", routing::get(show).delete(kill))
        .route("/api/terminals/{t}/signal", routing::post(signal))
        .route("/api/terminals/{t}/screen", routing::get(screen))
        .route("/api/terminals/{t}/scrollback", routing::get(scrollback))
        .route("/api/terminals/{t}/send", routing::post(send))
}

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

fn writable(principal: &Principal) -> Result<(), ApiError> {
    if principal.read_only {
        return Err(ApiError::read_only());
    }
    Ok(())
}

fn ok(value: impl serde::Serialize) -> Answer {
    Ok(Json(value).into_response())
}

async fn list(State(state): State<AppState>, Extension(who): Extension<Principal>) -> Answer {
    ok(state.registry.owner(&who.owner).list().await?)
}

/// `POST /api/terminals`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpawnBody {
    name: Option<String>,
    command: Option<Vec<String>>,
    cwd: Option<PathBuf>,
    env: Option<BTreeMap<String, String>>,
    cols: Option<u16>,
    rows: Option<u16>,
    restart: Option<String>,
    role: Option<String>,
}

impl SpawnBody {
    fn spec(self) -> Result<SpawnSpec, ApiError> {
        let mut spec = SpawnSpec::default();
        if let Some(name) = self.name {
            spec = spec.name(name);
        }
        if let Some(role) = self.role {
            spec = spec.role(role);
        }
        if let Some(restart) = self.restart {
            spec = spec.restart(restart.parse::<RestartPolicy>()?);
        }
        if let Some(cwd) = self.cwd {
            if !cwd.is_absolute() {
                return Err(ApiError::invalid(format!(
                    "cwd {} is not an absolute path",
                    cwd.display()
                )));
            }
            spec = spec.cwd(cwd);
        }
        for (key, value) in self.env.unwrap_or_default() {
            spec = spec.env(key, value);
        }
        match (self.cols, self.rows) {
            (Some(cols), Some(rows)) => spec = spec.size(cols, rows),
            (None, None) => {}
            _ => {
                return Err(ApiError::invalid(
                    "give both cols and rows, or neither".to_owned(),
                ));
            }
        }
        // argv, never shell text: the registry executes the words exactly,
        // one word included (`tmux::options::exec_words`).
        if let Some(words) = self.command.filter(|words| !words.is_empty()) {
            spec = spec.command(words);
        }
        spec.validate()?;
        Ok(spec)
    }
}

async fn spawn(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    bytes: Result<Bytes, BytesRejection>,
) -> Answer {
    writable(&who)?;
    let spec = body::<SpawnBody>(bytes)?.spec()?;
    // A spawn whose client went away still completes: the terminal is the
    // user's either way, and `list` shows it.
    let snapshot = state.registry.owner(&who.owner).spawn(spec).await?;
    Ok((StatusCode::CREATED, Json(snapshot)).into_response())
}

async fn show(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    Path(target): Path<String>,
) -> Answer {
    ok(state.registry.owner(&who.owner).show(&target).await?)
}

async fn kill(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    Path(target): Path<String>,
) -> Answer {
    writable(&who)?;
    // Looked up first, so a read-write token of another owner gets 404.
    let killed = state.registry.owner(&who.owner).kill(&target).await?;
    ok(json!({ "killed": killed }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SignalBody {
    signal: String,
}

async fn signal(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    Path(target): Path<String>,
    bytes: Result<Bytes, BytesRejection>,
) -> Answer {
    writable(&who)?;
    let signal = body::<SignalBody>(bytes)?.signal.parse::<Signal>()?;
    ok(state
        .registry
        .owner(&who.owner)
        .signal(&target, signal)
        .await?)
}

async fn screen(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    Path(target): Path<String>,
) -> Answer {
    ok(state.registry.owner(&who.owner).screen(&target).await?)
}

async fn scrollback(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    Path(target): Path<String>,
    RawQuery(query): RawQuery,
) -> Answer {
    let mut request = ReadRequest {
        offset: 0,
        count: None,
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
            "token" => {}
            _ => {
                return Err(ApiError::invalid(format!(
                    "unknown query parameter {key:?}"
                )));
            }
        }
    }
    ok(state
        .registry
        .owner(&who.owner)
        .read(&target, request)
        .await?)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SendBody {
    text: String,
    #[serde(default)]
    submit: bool,
    wait: Option<String>,
    timeout: Option<f64>,
}

async fn send(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    Path(target): Path<String>,
    bytes: Result<Bytes, BytesRejection>,
) -> Answer {
    writable(&who)?;
    let body = body::<SendBody>(bytes)?;
    let timeout = body
        .timeout
        .map(|t| {
            Duration::try_from_secs_f64(t)
                .map_err(|_| ApiError::invalid(format!("timeout {t} is not a number of seconds")))
        })
        .transpose()?;
    let request = SendRequest {
        text: body.text.into_bytes().into(),
        submit: body.submit,
        wait: body.wait.as_deref().unwrap_or("idle").parse::<WaitFor>()?,
        timeout,
    };
    let handle = state
        .registry
        .owner(&who.owner)
        .send(&target, request)
        .await?;
    let operation = handle.operation();
    let result = handle.result().await?;
    let output = operation.read_output();
    let answer: Value = json!({
        "output": output.text,
        "wait_reason": result.wait_reason,
        "status": result.status,
        "viewport": result.viewport,
        "truncated": result.truncated || output.truncated,
    });
    ok(answer)
}
