//! The MCP tools, one per registry verb, each returning what the CLI's
//! `--json` prints for that verb. Every engine error becomes a tool error
//! (`isError: true`, text `CODE: message`), never a protocol error or a
//! crash; only arguments that do not fit the tool's type are a protocol
//! error (invalid params, -32602, checked before the tool runs). Nothing here kills a terminal except `terminal_kill`.

use std::time::Duration;

use rmcp::handler::server::tool::{ToolCallContext, schema_for_output};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation,
    ProgressNotificationParam, ProgressToken, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, tool, tool_handler, tool_router};
use serde_json::json;

use super::args::check_arguments;
use super::{MAX_TEXT_BYTES, McpServer, failure, keep_tail, keep_tail_lines, success};
use crate::Error;
use crate::registry::{SendOperation, SignalDelivery, TerminalSnapshot};
use crate::screen::Screen;
use crate::verbs::RenameRequest;
use crate::verbs::{
    self, KillAnswer, ListRequest, ReadAnswer, ReadRequest, SearchAnswer, SearchRequest,
    SendAnswer, SendRequest, SignalRequest, SpawnRequest, TerminalRequest, WaitAnswer, WaitRequest,
};

/// Tool results as rmcp wants them; the error side is never used (engine
/// errors are tool results), it is the SDK's signature.
type ToolResult = std::result::Result<CallToolResult, ErrorData>;

/// The least time between two progress notifications of one send: a
/// chatty program must not flood the client.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// Characters of the newest output line a progress message carries.
const PROGRESS_LINE_CHARS: usize = 200;

/// The answer when the client cancelled: rmcp drops the response to a
/// cancelled request, so this is for the log only.
fn cancelled(what: &str, terminal: &str) -> ToolResult {
    tracing::info!(tool = what, terminal, "cancelled by the client");
    Ok(failure(&Error::Cancelled(format!("{what} on {terminal}"))))
}

/// `?` for a tool's body: an engine error ends the call as its tool error.
macro_rules! attempt {
    ($result:expr) => {
        match $result {
            Ok(value) => value,
            Err(error) => return Ok(failure(&error)),
        }
    };
}

#[tool_router(vis = "pub(super)")]
impl McpServer {
    #[tool(
        name = "terminal_spawn",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = false, open_world_hint = true),
        output_schema = schema_for_output::<TerminalSnapshot>(),
        description = "Start a persistent terminal (a shell unless `command` is given; its words \
                       are executed exactly, not through a shell). It keeps running across restarts \
                       of this server. Returns its snapshot: id, name, status, pid, restart policy."
    )]
    async fn terminal_spawn(
        &self,
        Parameters(request): Parameters<SpawnRequest>,
        context: RequestContext<RoleServer>,
    ) -> ToolResult {
        // Dropping the spawn cancels it (and rolls back what it made).
        Ok(answer(tokio::select! {
            spawned = verbs::spawn(self.registry.owner(&self.owner), request) => spawned,
            () = context.ct.cancelled() => Err(crate::Error::Cancelled(
                "terminal_spawn: the request was cancelled".to_owned(),
            )),
        }))
    }

    #[tool(
        name = "terminal_list",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<Vec<TerminalSnapshot>>(),
        description = "List your terminals in creation order, as snapshots (id, name, status, pid)."
    )]
    async fn terminal_list(&self) -> ToolResult {
        Ok(answer(
            verbs::list(self.registry.owner(&self.owner), &ListRequest {}).await,
        ))
    }

    #[tool(
        name = "terminal_show",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<TerminalSnapshot>(),
        description = "One terminal's snapshot (id, name, status, pid, restart policy)."
    )]
    async fn terminal_show(&self, Parameters(request): Parameters<TerminalRequest>) -> ToolResult {
        Ok(answer(
            verbs::show(self.registry.owner(&self.owner), &request).await,
        ))
    }

    #[tool(
        name = "terminal_send",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = true),
        output_schema = schema_for_output::<SendAnswer>(),
        description = "Type text into a terminal (with `submit`, press Enter after it) and wait \
                       until the program is done with it (`wait`: command, the default, types at \
                       the shell's prompt or into a program reading the terminal, and waits until \
                       every command of the text ended and the prompt is back). Returns {output, \
                       exit_code, commands, wait_reason, typed, status, truncated}: the output it \
                       produced, escape sequences stripped (all its commands'); `commands` lists \
                       each command the shell ran (text, exit_code, duration_secs, cursors); \
                       `wait_reason` is command, stdin_read (a program reads the terminal), busy \
                       (it waits on other files, e.g. a server), idle, exited, timeout or \
                       cancelled; `typed: false` (with `not_typed_reason`) when the text could \
                       not be typed by the deadline: it is then never typed. The whole answer is at most \
                       `max_bytes` (default and most 64 KiB) and `max_lines`, the newest output \
                       kept (`truncated` says when older output was cut); `include_screen: true` \
                       adds the screen as `viewport`; `cursor` is where a `terminal_read` with \
                       `since` goes on, `start_cursor` where this output began. Reports \
                       progress while it waits when the request carries a progress token; a \
                       cancel stops the wait, not the program."
    )]
    async fn terminal_send(
        &self,
        Parameters(mut request): Parameters<SendRequest>,
        context: RequestContext<RoleServer>,
    ) -> ToolResult {
        // An agent's commands stay out of the shell's history unless asked.
        request.history.get_or_insert(false);
        let terminal = request.terminal.clone();
        let sending = attempt!(verbs::send(self.registry.owner(&self.owner), request).await);
        let operation = sending.operation();
        let result = sending.answer();
        tokio::pin!(result);
        let progress = async {
            match context.meta.get_progress_token() {
                Some(token) => report_progress(operation.as_ref(), &context.peer, token).await,
                None => std::future::pending().await,
            }
        };
        let result = tokio::select! {
            result = &mut result => result,
            () = progress => unreachable!("progress reports until the send ends"),
            () = context.ct.cancelled() => {
                operation.cancel();
                // The send ends promptly once cancelled; waiting for it
                // frees the terminal for the next send before we answer.
                let _ = result.await;
                return cancelled("terminal_send", &terminal);
            }
        };
        Ok(success(&attempt!(result)))
    }

    #[tool(
        name = "terminal_read",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<ReadAnswer>(),
        description = "Read a page of a terminal's scrollback, escape sequences stripped, counted \
                       back from the newest line: `offset` lines skipped, `count` lines returned \
                       (default 100, at most 10000). Or, with `since: CURSOR` (a `next_cursor`, or \
                       a send's `cursor`/`start_cursor`), the output written after it, oldest \
                       first, as `lines`, `text` or `bytes` (`format`). The whole answer is at \
                       most `max_bytes` (default and most 64 KiB) and `max_lines`. Returns {lines, \
                       total_lines, range, truncated, next_cursor}; with since, {lines|text|bytes, \
                       truncated, next_cursor, more, gap, resumed_at}: read on from next_cursor \
                       while `more`; `gap` says why it starts at `resumed_at` instead of the \
                       cursor (evicted: no longer held; stale: an earlier engine run's cursor)."
    )]
    async fn terminal_read(&self, Parameters(request): Parameters<ReadRequest>) -> ToolResult {
        Ok(answer(
            verbs::read(self.registry.owner(&self.owner), request).await,
        ))
    }

    #[tool(
        name = "terminal_search",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<SearchAnswer>(),
        description = "Search scrollback with a regex (Rust syntax), escape sequences stripped as \
                       in terminal_read: one terminal's (`terminal`) or all of yours. Returns \
                       {matches: [{terminal, name, line, text, before, after}], searched, \
                       truncated}: `line` counts as terminal_read's range does, `context` lines \
                       (at most 10) around each, at most `max_matches` (default 50, at most 500; \
                       the newest kept) and `max_bytes` (default and most 64 KiB)."
    )]
    async fn terminal_search(&self, Parameters(request): Parameters<SearchRequest>) -> ToolResult {
        Ok(answer(
            verbs::search(self.registry.owner(&self.owner), &request).await,
        ))
    }

    #[tool(
        name = "terminal_commands",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<crate::registry::CommandsAnswer>(),
        description = "List the terminal's last commands as its integrated shell marked them in \
                       the output stream: {commands: [{id, text, start_cursor, end_cursor, \
                       exit_code, duration_secs, running}], known_from, unknown_ended, total}, \
                       oldest first, the newest `limit` (default 20, at most 1000). An id is the \
                       command's start_cursor; terminal_wait {command: ID or \"last\"} collects its \
                       exit_code and output. Only what the stream holds is known: nothing before \
                       `known_from` (e.g. before an engine restart); `unknown_ended` counts end \
                       marks whose start is not held (no code is reported for them)."
    )]
    async fn terminal_commands(
        &self,
        Parameters(request): Parameters<verbs::CommandsRequest>,
    ) -> ToolResult {
        Ok(answer(
            verbs::commands(self.registry.owner(&self.owner), &request).await,
        ))
    }

    #[tool(
        name = "terminal_screen",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<Screen>(),
        description = "Capture a terminal's visible screen: {lines, cols, rows, cursor} (at most \
                       64 KiB of text; rows beyond that are dropped from the top)."
    )]
    async fn terminal_screen(
        &self,
        Parameters(request): Parameters<TerminalRequest>,
    ) -> ToolResult {
        let screen = attempt!(verbs::screen(self.registry.owner(&self.owner), &request).await);
        let mut value = match serde_json::to_value(&screen) {
            Ok(value) => value,
            Err(e) => {
                return Ok(failure(&Error::io(
                    "encoding the screen",
                    std::io::Error::other(e),
                )));
            }
        };
        if let Some(lines) = value.get_mut("lines")
            && let Ok(mut rows) = serde_json::from_value::<Vec<String>>(lines.take())
        {
            keep_tail_lines(&mut rows, MAX_TEXT_BYTES);
            *lines = json!(rows);
        }
        Ok(success(&value))
    }

    #[tool(
        name = "terminal_wait",
        annotations(read_only_hint = true, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<WaitAnswer>(),
        description = "Wait until a line of the terminal's screen or its last 200 lines of \
                       scrollback contains `text` or matches `regex`, or until the program exits \
                       (`exit: true`), or until a command ends (`command`: an id from \
                       terminal_commands or a send's start_cursor, or \"last\"; it then returns \
                       {matched, command, exit_code, duration_secs, output}, however long after \
                       its send timed out); give exactly one. Returns {matched}: the matching line \
                       (at most 64 KiB) or the exit status in words. Past `timeout_secs` (default 30) \
                       it is a TIMEOUT error showing the last lines searched. A cancel stops the \
                       wait, not the program."
    )]
    async fn terminal_wait(
        &self,
        Parameters(request): Parameters<WaitRequest>,
        context: RequestContext<RoleServer>,
    ) -> ToolResult {
        let waited = tokio::select! {
            waited = verbs::wait(self.registry.owner(&self.owner), &request) => waited,
            () = context.ct.cancelled() => return cancelled("terminal_wait", &request.terminal),
        };
        let mut found = attempt!(waited);
        keep_tail(&mut found.matched, MAX_TEXT_BYTES);
        if let Some(output) = found.output.as_mut() {
            keep_tail(output, MAX_TEXT_BYTES);
        }
        Ok(success(&found))
    }

    #[tool(
        name = "terminal_signal",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = false, open_world_hint = false),
        output_schema = schema_for_output::<SignalDelivery>(),
        description = "Send a signal (INT TERM KILL HUP QUIT TSTP CONT WINCH USR1 USR2) to the \
                       terminal's foreground process group, e.g. INT for Ctrl-C. Returns \
                       {signal, pgid}."
    )]
    async fn terminal_signal(&self, Parameters(request): Parameters<SignalRequest>) -> ToolResult {
        Ok(answer(
            verbs::signal(self.registry.owner(&self.owner), &request).await,
        ))
    }

    #[tool(
        name = "terminal_kill",
        annotations(read_only_hint = false, destructive_hint = true, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<KillAnswer>(),
        description = "Kill a terminal and its whole process tree, and forget it. Returns \
                       {killed}: false when another kill of it was already under way."
    )]
    async fn terminal_kill(&self, Parameters(request): Parameters<TerminalRequest>) -> ToolResult {
        Ok(answer(
            verbs::kill(self.registry.owner(&self.owner), &request).await,
        ))
    }

    #[tool(
        name = "terminal_rename",
        annotations(read_only_hint = false, destructive_hint = false, idempotent_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<TerminalSnapshot>(),
        description = "Give a terminal a new name (unique among yours, not shaped like an id); \
                       its snapshot. The old name no longer finds it."
    )]
    async fn terminal_rename(&self, Parameters(request): Parameters<RenameRequest>) -> ToolResult {
        Ok(answer(
            verbs::rename(self.registry.owner(&self.owner), &request).await,
        ))
    }
}

/// A verb's result as a tool result: its answer, or its error.
fn answer(result: crate::Result<impl serde::Serialize>) -> CallToolResult {
    match result {
        Ok(value) => success(&value),
        Err(error) => failure(&error),
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for McpServer {
    /// Routes a call once its arguments fit the tool's type; otherwise
    /// answers invalid params (-32602) without running anything.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> std::result::Result<CallToolResponse, ErrorData> {
        check_arguments(&request.name, request.arguments.as_ref())
            .map_err(|message| ErrorData::invalid_params(message, None))?;
        let call = ToolCallContext::new(self, request, context);
        self.tool_router.call(call).await
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                "tmux-engine",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(INSTRUCTIONS)
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
shows those started earlier. Address a terminal by its id or its name.";

/// Reports a send's output as progress (bytes so far, with the newest
/// line as the message) until the send ends; never returns on its own.
async fn report_progress(
    operation: &dyn SendOperation,
    peer: &Peer<RoleServer>,
    token: ProgressToken,
) {
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
