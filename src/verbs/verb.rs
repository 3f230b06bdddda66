//! What a verb declares: the [`Verb`] type whose fields every face reads
//! (its types, hints, route, words, and each trait a face acts on) and
//! the function types behind them. Apart from the table (`table.rs`, the
//! entries) so that the shape of a declaration reads on its own, and a new
//! trait is one field here and one value per entry there.

use std::future::Future;
use std::pin::Pin;

use schemars::Schema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

use super::arguments::Arguments;
use super::requests::SendRequest;
use crate::Result;
use crate::registry::{Owned, SendHandle};

/// A type's JSON Schema under the given settings (each face picks its
/// draft and whether to inline).
pub(crate) type SchemaFn = fn(SchemaSettings) -> Schema;

/// A verb run from its arguments to its answer as JSON.
pub(crate) type RunFn =
    for<'a> fn(Owned<'a>, Arguments) -> Pin<Box<dyn Future<Output = Result<Value>> + Send + 'a>>;

/// A verb run from its arguments to its answer's JSON text.
pub(crate) type EncodeFn =
    for<'a> fn(Owned<'a>, Arguments) -> Pin<Box<dyn Future<Output = Result<Vec<u8>>> + Send + 'a>>;

/// A verb started from its arguments: its handle (see [`Verb::progress`]).
pub(crate) type StartFn =
    for<'a> fn(
        Owned<'a>,
        Arguments,
    ) -> Pin<Box<dyn Future<Output = Result<SendHandle<Value>>> + Send + 'a>>;

/// The send a call with these arguments makes (see [`Verb::types`]).
pub(crate) type TypesFn = fn(&Map<String, Value>) -> Result<SendRequest>;

/// An answer as a person reads it.
pub(crate) type TextFn = fn(Value) -> Result<Vec<u8>>;

/// A verb's HTTP route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// `GET`, `POST` or `DELETE`; a `GET` or `DELETE` takes its arguments
    /// from the query, a `POST` from its JSON body.
    pub method: &'static str,
    /// axum's syntax; `{t}` is the terminal (id or name), which the
    /// arguments then must not name.
    pub path: &'static str,
    /// The status of a success.
    pub status: u16,
}

/// One verb, declared once for every face.
#[derive(Debug, Clone, Copy)]
pub struct Verb {
    /// The verb (`read`); the OpenAPI `operationId`.
    pub name: &'static str,
    /// The CLI's subcommand.
    pub cli: &'static str,
    /// The MCP tool's name.
    pub tool: &'static str,
    /// The HTTP route, if the verb has one.
    pub route: Option<Route>,
    /// It changes nothing (MCP `readOnlyHint`; a read-only token may call it).
    pub read_only: bool,
    /// It may destroy something (MCP `destructiveHint`).
    pub destructive: bool,
    /// Calling it twice does what once does (MCP `idempotentHint`).
    pub idempotent: bool,
    /// It reaches beyond the engine's own state (MCP `openWorldHint`).
    pub open_world: bool,
    /// One line: the route's summary.
    pub summary: &'static str,
    /// What it does and every field of its answer: the tool's
    /// description and the route's. Each argument's default and bounds
    /// are its own (the request type's field docs, in the schema).
    pub description: &'static str,
    /// The request's schema.
    pub request: SchemaFn,
    /// The answer's schema.
    pub answer: SchemaFn,
    /// Whether `arguments` fit the request type (unknown, missing or
    /// mistyped fields), without running anything.
    pub check: fn(&Map<String, Value>) -> std::result::Result<(), serde_json::Error>,
    /// Runs the verb.
    pub run: RunFn,
    /// A client's cancel stops it (MCP's `notifications/cancelled`: a
    /// dropped spawn rolls back what it made; a send with `progress`
    /// stops through its operation); the others are short and run to
    /// their end.
    pub cancellable: bool,
    /// The HTTP API runs it in a task of its own: a client gone away
    /// does not stop it (a spawn completes; the terminal is the user's
    /// either way, and `list` shows it).
    pub detached: bool,
    /// Runs it and writes its answer's JSON text straight from the typed
    /// answer, where the `Value` between costs (`list`: a third of the
    /// CPU at 1,000 terminals); the HTTP API's way when present.
    pub encode: Option<EncodeFn>,
    /// Its answer's text is left whole by the verb layer (a screen's
    /// `lines`, a wait's `matched` and `output`): MCP bounds it to
    /// `MAX_ANSWER_BYTES` (64 KiB), the newest kept.
    pub unbounded: bool,
    /// Starts it as an operation whose output is reported as progress
    /// while it runs and whose cancel stops it (MCP's progress
    /// notifications), then answers.
    pub progress: Option<StartFn>,
    /// The send it makes, whose typed line the MCP guard rails judge
    /// (`mcp --deny/--allow`).
    pub types: Option<TypesFn>,
    /// Arguments MCP sets where the agent leaves them out (absent or
    /// null): an agent's terminal has no pager or editor waiting for
    /// keys; an agent's commands stay out of the shell's history.
    pub agent_defaults: &'static [(&'static str, bool)],
    /// What a share link's holder (one terminal) may do with it.
    pub shared: Shared,
    /// Its answer as a person reads it: the CLI without `--json`.
    pub text: TextFn,
    /// It scans the whole state directory: the CLI reports on stderr the
    /// records that scan found corrupt and moved aside (stdout keeps its
    /// shape).
    pub scans: bool,
}

/// What a share link's holder (`link --terminal T`: one terminal) may do
/// with a verb; the bridge's own routes (attach, files) say it in
/// `bridge/scope.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shared {
    /// Nothing: `403 FORBIDDEN_SCOPE` (another terminal: `404`).
    No,
    /// Call it on the link's terminal.
    Terminal,
    /// Call it; its answer (a list of terminals) keeps the link's alone.
    Filtered,
}
