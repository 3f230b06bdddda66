//! The HTTP face of sign-in: the bodies and the six handlers of
//! `/api/sign-in`, `/api/session` and `/api/links`. Apart from the store
//! (`mod.rs`) so that the codes and sessions stay plain values, tested
//! without a router; these only read requests, ask the store and audit.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};

use super::DEFAULT_CODE_LIFETIME;
use crate::Error;
use crate::bridge::AppState;
use crate::bridge::api::ApiError;
use crate::bridge::auth::Principal;

/// `POST /api/sign-in {"code"}`'s body.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SessionRequest {
    /// The one-time code of a sign-in link.
    pub code: String,
}

/// A session: what the page keeps, and who it acts as.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(crate) struct SessionAnswer {
    /// The credential to send as `Authorization: Bearer` (absent from
    /// `GET /api/session`, which only says who the caller is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The owner whose terminals it sees.
    pub owner: String,
    /// It may only look.
    pub read_only: bool,
    /// A share link's holder: the one terminal (its id) it may use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub terminal: Option<String>,
}

/// `POST /api/links`'s body.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LinkRequest {
    /// Whoever signs in with it may only look (a read-only caller's links
    /// always are).
    #[serde(default)]
    pub read_only: bool,
    /// Seconds the code works (default 600); for a share link also how
    /// long its holder's session lasts.
    #[serde(default)]
    #[schemars(range(min = 1, max = 604_800))]
    pub expires: Option<u64>,
    /// A share link for this one terminal (id or name): its holder sees
    /// and touches only it.
    #[serde(default)]
    pub terminal: Option<String>,
    /// A share link's holder may also move files in and out of the
    /// terminal's working directory (`PUT`/`GET .../files`); without it
    /// those are `403 FORBIDDEN_SCOPE`.
    #[serde(default)]
    pub files: bool,
}

pub(in crate::bridge) fn json_body<T: serde::de::DeserializeOwned + 'static>(
    bytes: Result<Bytes, BytesRejection>,
) -> Result<T, ApiError> {
    let bytes = bytes.map_err(|rejection| {
        ApiError::from(Error::InvalidInput(rejection.body_text())).with_status(rejection.status())
    })?;
    // The verbs' own body reading: a JSON object (serde reads a struct
    // from an array too: `[]` would be a link request with every
    // default), whole numbers as integers.
    crate::bridge::api::body(Ok(bytes))?
        .parse()
        .map_err(ApiError::from)
}

/// A used, expired or unknown code: the page shows its sign-in notice.
fn refused() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "UNAUTHORIZED",
        "this sign-in link was already used or has expired: ask for a new one \
         (tmux-engine link)"
            .to_owned(),
    )
}

/// `POST /api/sign-in {"code"}` (no credential needed: the code is one):
/// a new session for the code's principal, once.
pub(in crate::bridge) async fn sign_in(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let SessionRequest { code } = json_body(body)?;
    let (session, principal, terminal) = state.signins.redeem(&code).ok_or_else(refused)?;
    let mut act = crate::audit::Act::new("sign_in", principal.owner.as_str()).via("code");
    if let Some(terminal) = &terminal {
        act = act.terminal(terminal);
    }
    state.audit(act);
    Ok(Json(SessionAnswer {
        session: Some(session),
        owner: principal.owner.as_str().to_owned(),
        read_only: principal.read_only,
        terminal,
    })
    .into_response())
}

/// `GET /api/session`: who the caller is.
pub(in crate::bridge) async fn whoami(
    Extension(who): Extension<Principal>,
    scope: Option<Extension<crate::bridge::scope::Scope>>,
) -> Response {
    Json(SessionAnswer {
        session: None,
        owner: who.owner.as_str().to_owned(),
        read_only: who.read_only,
        terminal: scope.map(|Extension(scope)| scope.terminal),
    })
    .into_response()
}

/// `DELETE /api/session`: signs the presented session out (a token is
/// not a session: nothing to end, still 200).
pub(in crate::bridge) async fn sign_out(
    headers: HeaderMap,
    State(state): State<AppState>,
) -> Response {
    let ended = crate::bridge::auth::bearer(&headers)
        .is_some_and(|presented| state.signins.end_session(presented.as_bytes()));
    Json(serde_json::json!({ "signed_out": ended })).into_response()
}

/// `POST /api/links {read_only?, expires?}`: a new sign-in link for the
/// caller's owner.
pub(in crate::bridge) async fn mint(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request: LinkRequest = json_body(body)?;
    let lifetime = request
        .expires
        .map_or(DEFAULT_CODE_LIFETIME, Duration::from_secs);
    let terminal = match &request.terminal {
        Some(target) => Some(
            state
                .registry
                .owner(&who.owner)
                .show(target)
                .await?
                .id
                .as_str()
                .to_owned(),
        ),
        None => None,
    };
    let principal = Principal {
        owner: who.owner,
        read_only: who.read_only || request.read_only,
    };
    let owner = principal.owner.clone();
    let minted =
        state
            .signins
            .mint_for(principal, who.read_only, terminal, request.files, lifetime)?;
    let mut act = crate::audit::Act::new("link", owner.as_str()).detail(&minted.id);
    if let Some(terminal) = &minted.terminal {
        act = act.terminal(terminal);
    }
    state.audit(act);
    Ok((StatusCode::CREATED, Json(minted)).into_response())
}

/// `GET /api/links`: the caller's owner's links.
pub(in crate::bridge) async fn links(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
) -> Response {
    Json(state.signins.list(&who.owner)).into_response()
}

/// `DELETE /api/links/{id}`: revokes one of the owner's links and the
/// sessions signed in through it (a read-only caller may not).
pub(in crate::bridge) async fn revoke(
    State(state): State<AppState>,
    Extension(who): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    if who.read_only {
        return Err(ApiError::from(Error::ReadOnly(
            "a read-only caller cannot revoke links".to_owned(),
        )));
    }
    if !state.signins.revoke(&who.owner, &id) {
        return Err(ApiError::from(Error::InvalidInput(format!("no link {id}")))
            .with_status(StatusCode::NOT_FOUND));
    }
    state.audit(crate::audit::Act::new("link_revoked", who.owner.as_str()).detail(&id));
    Ok(Json(serde_json::json!({ "revoked": id })).into_response())
}
