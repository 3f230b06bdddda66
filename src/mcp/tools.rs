//! The MCP tools: one per verb of the verb table ([`VERBS`]), whose entry
//! gives the tool its name, description, annotations and schemas, and runs
//! it; each returns what the CLI's `--json` prints for that verb. Every
//! engine error becomes a tool error (`isError: true`, text `CODE:
//! message`), never a protocol error or a crash; only arguments that do not
//! fit the tool's type are a protocol error (invalid params, -32602,
//! checked before the tool runs), and a panic in the engine, which
//! answers an internal error (-32603) instead of no answer. MCP's own
//! parts are here, each asked of the verb's entry, never its name: the
//! agent's defaults (a spawn's `agent`, a send's `history: false`), the
//! guard rails on what it types, progress, cancellation, and the bound on
//! the text the verb layer does not bound (screen, wait, errors).
//! Nothing here kills a terminal except `terminal_kill`.

use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolResponse, CallToolResult, Implementation, ProgressNotificationParam, ProgressToken,
    ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, tool_handler};
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

use super::guard::Target;
use super::schema::{lean_input, lean_output, required_only};
use super::{McpServer, failure, success};
use crate::Error;
use crate::registry::{SendHandle, SendOperation};
use crate::shell::ShellKind;
use crate::tmux::{ProcessId, procfs};
use crate::verbs::{
    self, Arguments, KEYS_LINE, MAX_ANSWER_BYTES, TerminalRequest, VERBS, Verb, keep_tail_json,
    keep_tail_lines_json,
};

/// The least time between two progress notifications of one send: a
/// chatty program must not flood the client.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// Characters of the newest output line a progress message carries.
const PROGRESS_LINE_CHARS: usize = 200;

/// The tools of every verb in the table.
pub(super) fn router() -> ToolRouter<McpServer> {
    let outputs: Vec<_> = VERBS.iter().map(output_of).collect();
    let mut router = ToolRouter::new();
    for (verb, output) in VERBS.iter().zip(&outputs) {
        // An answer a read-only tool already describes (spawn's and
        // rename's snapshot, within terminal_show's) is shaped there once;
        // here only its fields' names, which still validate it.
        let described = !verb.read_only
            && VERBS
                .iter()
                .zip(&outputs)
                .any(|(other, shape)| other.read_only && covers(shape, output));
        let output = if described {
            required_only(output)
        } else {
            output.clone()
        };
        router.add_route(ToolRoute::new_dyn(tool(verb, output), move |context| {
            Box::pin(unwinding(verb, call(verb, context)))
        }));
    }
    router
}

/// Runs a tool call so that a panic in it answers the call with an
/// internal error (-32603) naming the panic: rmcp runs each call in a task
/// of its own and sends nothing when that task panics, so the client would
/// wait for ever (an agent reads "still running" and sends again).
async fn unwinding(
    verb: &Verb,
    call: impl Future<Output = Result<CallToolResponse, ErrorData>>,
) -> Result<CallToolResponse, ErrorData> {
    use futures_util::FutureExt;
    match std::panic::AssertUnwindSafe(call).catch_unwind().await {
        Ok(answer) => answer,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|text| (*text).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_owned());
            tracing::error!(tool = verb.tool, what, "a tool call panicked");
            Err(ErrorData::internal_error(
                format!("{} failed inside the engine: {what}", verb.tool),
                None,
            ))
        }
    }
}

/// Whether the output schema `wider` says all `narrower` does: the same
/// required fields, and each of its fields with the same shape (`show`'s
/// answer is the snapshot and one optional field more).
fn covers(wider: &Map<String, Value>, narrower: &Map<String, Value>) -> bool {
    let properties = |schema: &Map<String, Value>| schema.get("properties").cloned();
    wider.get("required") == narrower.get("required")
        && match (properties(wider), properties(narrower)) {
            (Some(Value::Object(wide)), Some(Value::Object(narrow))) => narrow
                .iter()
                .all(|(name, shape)| wide.get(name) == Some(shape)),
            (wide, narrow) => wide == narrow,
        }
}

/// The lean output schema of a verb's answer.
fn output_of(verb: &Verb) -> Map<String, Value> {
    lean_output((verb.answer)(SchemaSettings::draft2020_12().for_serialize()).to_value())
}

/// The tool as the client sees it: all of it from the verb's entry, its
/// schemas lean ([`super::schema`]).
fn tool(verb: &Verb, output: Map<String, Value>) -> Tool {
    let input = lean_input((verb.request)(SchemaSettings::draft2020_12()).to_value());
    let hints = ToolAnnotations::new()
        .read_only(verb.read_only)
        .destructive(verb.destructive)
        .idempotent(verb.idempotent)
        .open_world(verb.open_world);
    Tool::new(verb.tool, verb.description, Arc::new(input))
        .with_raw_output_schema(Arc::new(output))
        .with_annotations(hints)
}

/// Runs one tool call: the agent's defaults filled in, its arguments
/// checked against the verb's request type (invalid params when they do
/// not fit), the guard rails asked of what it types, then the verb: with
/// progress where it reports it, stopped by a cancel where it is
/// cancellable.
async fn call(
    verb: &'static Verb,
    context: ToolCallContext<'_, McpServer>,
) -> Result<CallToolResponse, ErrorData> {
    let server = context.service;
    let mut arguments = context.arguments.unwrap_or_default();
    for &(key, value) in verb.agent_defaults {
        let field = arguments.entry(key).or_insert(Value::Null);
        if field.is_null() {
            *field = Value::Bool(value);
        }
    }
    (verb.check)(&arguments).map_err(|error| {
        ErrorData::invalid_params(
            format!("invalid arguments for {}: {error}", verb.tool),
            None,
        )
    })?;
    let context = context.request_context;
    if let Some(types) = verb.types
        && !server.guard.is_open()
    {
        let request = match types(&arguments) {
            Ok(request) => request,
            Err(error) => return Ok(failure(&error).into()),
        };
        let target = server.target(&request.terminal).await;
        // What reaches the shell: the text, then the keys' text elements;
        // an Enter among the keys runs the line as `submit`.
        let (line, submit) = request.typed_line();
        if let Err(error) = server.guard.check(&line, submit, target).await {
            return Ok(failure(&error).into());
        }
    }
    let owned = server.owned();
    let arguments = Arguments::Json(arguments);
    if let Some(start) = verb.progress {
        return Ok(followed(verb, start(owned, arguments), &context)
            .await
            .into());
    }
    let run = (verb.run)(owned, arguments);
    // A dropped spawn rolls back what it made.
    let answer = if verb.cancellable {
        tokio::select! {
            answer = run => answer,
            () = context.ct.cancelled() => Err(cancelled(verb.tool)),
        }
    } else {
        run.await
    };
    let result = match answer {
        Ok(mut value) => {
            if verb.unbounded {
                bound_text(&mut value);
            }
            success(&value)
        }
        Err(error) => failure(&error),
    };
    Ok(result.into())
}

/// A verb started as an operation: its output reported as progress while
/// it runs (when the client asked with a progress token), a cancel that
/// stops it.
async fn followed(
    verb: &Verb,
    started: impl std::future::Future<Output = crate::Result<SendHandle<Value>>>,
    context: &RequestContext<RoleServer>,
) -> CallToolResult {
    let SendHandle {
        operation,
        result: answer,
    } = match started.await {
        Ok(started) => started,
        Err(error) => return failure(&error),
    };
    tokio::pin!(answer);
    let progress = async {
        match context.meta.get_progress_token() {
            Some(token) => report_progress(operation.as_ref(), &context.peer, token).await,
            None => std::future::pending().await,
        }
    };
    let result = tokio::select! {
        result = &mut answer => result,
        () = progress => unreachable!("progress reports until the operation ends"),
        () = context.ct.cancelled(), if verb.cancellable => {
            operation.cancel();
            // It ends promptly once cancelled; waiting for it frees the
            // terminal for the next call before we answer.
            let _ = answer.await;
            return failure(&cancelled(verb.tool));
        }
    };
    match result {
        Ok(answer) => success(&answer),
        Err(error) => failure(&error),
    }
}

/// Bounds the text of the answers the verb layer leaves whole (a screen's
/// `lines`, a wait's `matched` and `output`) to [`MAX_ANSWER_BYTES`], the
/// newest kept.
fn bound_text(value: &mut Value) {
    let Some(fields) = value.as_object_mut() else {
        return;
    };
    for key in ["matched", "output"] {
        if let Some(Value::String(text)) = fields.get_mut(key) {
            keep_tail_json(text, MAX_ANSWER_BYTES);
        }
    }
    if let Some(lines) = fields.get_mut("lines")
        && let Ok(mut rows) = serde_json::from_value::<Vec<String>>(lines.clone())
    {
        keep_tail_lines_json(&mut rows, MAX_ANSWER_BYTES, None);
        *lines = Value::from(rows);
    }
}

/// The error of a call the client cancelled: rmcp drops the response to a
/// cancelled request, so this is for the log only.
fn cancelled(tool: &str) -> Error {
    tracing::info!(tool, "cancelled by the client");
    Error::Cancelled(format!("{tool}: the request was cancelled"))
}

impl McpServer {
    /// Where a send's text goes: a shell's prompt when the terminal's
    /// program is a shell the engine knows (by its executable) and it is
    /// the terminal's foreground process group (no command of it runs),
    /// else a program's input. Read from `/proc`, so it needs no marks
    /// (sh has none while a command runs) and no signal.
    async fn target(&self, terminal: &str) -> Target {
        let request = TerminalRequest {
            terminal: terminal.to_owned(),
        };
        let owned = self.owned();
        let Some(pid) = verbs::snapshot(owned, &request)
            .await
            .ok()
            .and_then(|s| s.pid)
        else {
            return Target::Program;
        };
        let Some(stat) = procfs::stat(pid) else {
            return Target::Program;
        };
        // The shell's own group in front: none of its commands runs.
        if i64::from(stat.tpgid) != i64::from(pid) {
            return Target::Program;
        }
        // Named by its start time too, so the executable read next is
        // this shell's, not a process that took its pid since.
        let shell = ProcessId {
            pid,
            start_time: Some(stat.start_time),
        };
        procfs::executable(shell)
            .and_then(|exe| ShellKind::of(&exe))
            .map_or(Target::Program, Target::Prompt)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "tmux-engine",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(format!("{INSTRUCTIONS} {KEYS_LINE}"))
    }
}

/// What the client is told about the tools as a whole.
const INSTRUCTIONS: &str = "Persistent terminals: spawn a shell with terminal_spawn, run commands \
with terminal_send (submit: true; in a shell the engine started it returns exactly the \
command's output and exit_code), read what came since a cursor with terminal_read (since: the \
cursor a send or read returned), find text with terminal_search, list the last commands with terminal_commands (collect one \
that outlived its send with terminal_wait {command: \"last\"}), look with terminal_screen, \
wait for text with terminal_wait, interrupt with terminal_signal INT, rename with \
terminal_rename, and end with terminal_kill. Terminals outlive this server: terminal_list \
shows those started earlier. Address a terminal by its id or its name. `max_bytes` bounds an \
answer: 512 to 65536 (64 KiB, the default).";

/// Reports a send's output as progress (bytes so far, with the newest
/// line as the message) until the send ends; never returns on its own.
async fn report_progress(operation: &SendOperation, peer: &Peer<RoleServer>, token: ProgressToken) {
    let mut seen = 0;
    loop {
        operation.output_beyond(seen).await;
        let output = operation.read_output();
        // The send's buffer is bounded, so its length can stop growing
        // (or output can end): then there is nothing more to report.
        if output.bytes.len() <= seen {
            std::future::pending::<()>().await;
        }
        seen = output.bytes.len();
        let newest = output
            .text
            .lines()
            .rev()
            .find(|line| !line.trim().is_empty())
            .unwrap_or("");
        let message: String = newest.chars().take(PROGRESS_LINE_CHARS).collect();
        // Progress is best effort: a client gone away ends the session,
        // and the send's answer says everything anyway.
        #[allow(clippy::cast_precision_loss)]
        let progress = ProgressNotificationParam::new(token.clone(), seen as f64);
        let _ = peer.notify_progress(progress.with_message(message)).await;
        tokio::time::sleep(PROGRESS_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_call_is_answered_with_an_internal_error() {
        let verb = &VERBS[0];
        let answered = unwinding(verb, async { panic!("the stream broke its promise") }).await;
        let error = answered.expect_err("a panic is an error");
        assert_eq!(error.code, rmcp::model::ErrorCode::INTERNAL_ERROR);
        assert!(
            error.message.contains("the stream broke its promise"),
            "{error:?}"
        );
        assert!(error.message.starts_with(verb.tool), "{error:?}");
        let fine = unwinding(verb, async {
            Ok(CallToolResult::success(Vec::new()).into())
        })
        .await;
        assert!(fine.is_ok());
    }
}
