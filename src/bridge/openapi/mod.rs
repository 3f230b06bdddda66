//! The one table of the HTTP API ([`routes`]): the router is built from
//! it, and so is the OpenAPI 3.1 document served at
//! `GET /api/openapi.json` (behind the same authentication as every other
//! `/api` route), so a route cannot be served without being documented.
//! Request and answer schemas are the verb layer's types as `schemars`
//! derives them; nothing here is a hand-written schema of a field. This
//! file is the table and the router; the document written from it is
//! `document.rs`.

mod document;

use axum::Json;
use axum::extract::State;
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use axum::routing::{self, MethodRouter};
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};

use self::document::document;
use super::AppState;
use super::api;
use super::files::{self, DownloadQuery, UploadQuery, Uploaded};
use super::signin::{self, LinkInfo, LinkRequest, Minted, SessionAnswer, SessionRequest};
use super::ws;
use crate::verbs::{SchemaFn, VERBS};

/// One route of the HTTP API.
pub(super) struct Route {
    /// Its method.
    pub(super) method: Method,
    /// Its path, axum's syntax (`{t}` is the terminal's id or name).
    pub(super) path: &'static str,
    /// The verb it runs, as the document's `operationId`.
    pub(super) operation: &'static str,
    /// One line for the document.
    pub(super) summary: &'static str,
    /// The whole story, for the document (a verb's, as its MCP tool's).
    description: Option<&'static str>,
    /// Its JSON body's type (without `terminal` on a `{t}` path).
    body: Option<SchemaFn>,
    /// Its query parameters, as the properties of a type.
    query: Option<SchemaFn>,
    /// The answer's status and type (`None`: described by the summary).
    answer: (u16, Option<SchemaFn>),
    /// It authenticates itself (the WebSocket: refusals are close codes).
    pub(super) own_auth: bool,
    /// It takes no credential at all (the document says `security: []`).
    public: bool,
    /// Its body (a `PUT`) or its answer (a `GET`) is a file's bytes.
    bytes: bool,
    /// Its handler.
    handler: MethodRouter<AppState>,
}

fn schema<T: JsonSchema>(settings: SchemaSettings) -> Schema {
    settings.into_generator().into_root_schema_for::<T>()
}

/// Every route of the HTTP API, the page's excepted (`page.rs`): the
/// verbs' from the verb table, then the bridge's own.
pub(super) fn routes() -> Vec<Route> {
    let verbs = VERBS.iter().filter_map(|verb| {
        let route = verb.route?;
        let body = route.method == "POST";
        Some(Route {
            method: Method::from_bytes(route.method.as_bytes()).unwrap_or(Method::GET),
            path: route.path,
            operation: verb.name,
            summary: verb.summary,
            description: Some(verb.description),
            body: body.then_some(verb.request),
            query: (!body).then_some(verb.request),
            answer: (route.status, Some(verb.answer)),
            own_auth: false,
            public: false,
            bytes: false,
            handler: api::handler(verb, route),
        })
    });
    let own = |method, path, operation, summary, answer, own_auth, handler| Route {
        method,
        path,
        operation,
        summary,
        description: None,
        body: None,
        query: None,
        answer,
        own_auth,
        public: false,
        bytes: false,
        handler,
    };
    let mut routes: Vec<Route> = verbs.collect();
    routes.extend([
        own(
            Method::GET,
            "/api/viewers",
            "viewers",
            "How many viewers each of your terminals has in this serve, by id.",
            (
                200,
                Some(schema::<std::collections::BTreeMap<String, usize>>),
            ),
            false,
            routing::get(api::viewers),
        ),
        own(
            Method::GET,
            "/api/terminals/{t}/attach",
            "attach",
            "A WebSocket viewer (upgrade; authenticates itself, refusals are close codes \
             4401/4403/4400/4404; the frames are in docs/serve.md).",
            (101, None),
            true,
            routing::get(ws::attach),
        ),
        Route {
            body: Some(schema::<SessionRequest>),
            ..own(
                Method::POST,
                "/api/sign-in",
                "sign_in",
                "Exchange a one-time sign-in code (a link's `#code=`) for a session: send \
                 it as `Authorization: Bearer` (the WebSocket: subprotocol \
                 `bearer.SESSION` beside `tmux-engine`). A used or expired code is 401.",
                (200, Some(schema::<SessionAnswer>)),
                true,
                routing::post(signin::sign_in),
            )
        },
        Route {
            body: Some(schema::<super::prove::ProofRequest>),
            public: true,
            ..own(
                Method::POST,
                "/api/serve-proof",
                "serve_proof",
                "Prove this serve is the one serve.json records (no credential): \
                 {nonce: 32-128 hex digits} answers {proof: hex HMAC-SHA256 of the nonce \
                 under the key recorded beside the URL}; 404 when none is recorded.",
                (200, Some(schema::<super::prove::ProofAnswer>)),
                true,
                routing::post(super::prove::serve_proof),
            )
        },
        own(
            Method::GET,
            "/api/session",
            "whoami",
            "Who the credential acts as: {owner, read_only}.",
            (200, Some(schema::<SessionAnswer>)),
            false,
            routing::get(signin::whoami),
        ),
        own(
            Method::DELETE,
            "/api/session",
            "sign_out",
            "End the presented session (sign out).",
            (200, None),
            false,
            routing::delete(signin::sign_out),
        ),
        Route {
            body: Some(schema::<LinkRequest>),
            ..own(
                Method::POST,
                "/api/links",
                "link",
                "Mint a one-time sign-in link for your owner {read_only?, expires? (secs, \
                 default 600)}: open `BASE` + its `path` (`/#code=CODE`).",
                (201, Some(schema::<Minted>)),
                false,
                routing::post(signin::mint),
            )
        },
        own(
            Method::GET,
            "/api/links",
            "links",
            "Your links (never their codes), oldest first.",
            (200, Some(schema::<Vec<LinkInfo>>)),
            false,
            routing::get(signin::links),
        ),
        own(
            Method::DELETE,
            "/api/links/{id}",
            "revoke",
            "Revoke a link: its code stops working and its sessions end.",
            (200, None),
            false,
            routing::delete(signin::revoke),
        ),
        Route {
            query: Some(schema::<UploadQuery>),
            bytes: true,
            ..own(
                Method::PUT,
                "/api/terminals/{t}/files",
                "upload",
                "Write the body's bytes (application/octet-stream) as NAME in the terminal's \
                 working directory; an existing file only with overwrite=true (else 409), \
                 never through a symlink; 413 past serve --max-file-size; 403 for a \
                 read-only token.",
                (201, Some(schema::<Uploaded>)),
                false,
                routing::put(files::upload),
            )
        },
        Route {
            query: Some(schema::<DownloadQuery>),
            bytes: true,
            ..own(
                Method::GET,
                "/api/terminals/{t}/files",
                "download",
                "A regular file's bytes: PATH relative to the terminal's working directory, \
                 or absolute; 400 for a directory or a device, 413 past serve \
                 --max-file-size; 403 for a read-only token.",
                (200, None),
                false,
                routing::get(files::download),
            )
        },
        own(
            Method::GET,
            "/api/openapi.json",
            "openapi",
            "This document.",
            (200, None),
            false,
            routing::get(openapi),
        ),
    ]);
    routes
}

/// The routes of the table that `own_auth` selects, as a router.
pub(super) fn router(own_auth: bool) -> axum::Router<AppState> {
    routes()
        .into_iter()
        .filter(|route| route.own_auth == own_auth)
        .fold(axum::Router::new(), |router, route| {
            router.route(route.path, route.handler)
        })
}

async fn openapi(State(state): State<AppState>) -> Response {
    Json(document(&state.config.base_path)).into_response()
}
