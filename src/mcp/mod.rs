//! `tmux-engine mcp`: the registry's terminals as Model Context Protocol
//! tools, served over stdio with the official SDK (`rmcp`), so an agent
//! harness gets persistent, owner-scoped shells with one line of
//! configuration.
//!
//! | file       | job                                                        |
//! |------------|------------------------------------------------------------|
//! | `mod.rs`   | [`McpServer`], [`ToolSelection`], [`serve`], results       |
//! | `tools.rs` | the tools, one per entry of the verb table                 |
//! | `schema.rs` | the tools' schemas, lean: `tools/list` within 12 KB       |
//! | `guard.rs` | the guard rails on typed text (`--deny`, `--allow`, `bash -n`) |
//! | `transport.rs` | the stdio lines: -32700 for non-JSON, bounded in flight |
//!
//! One server holds one registry for one owner for its lifetime. It never
//! writes anything but protocol messages to its output (logs go through
//! `tracing`, which the binary points at stderr), never crashes on a bad
//! call (every engine error is a tool error whose text starts with its
//! code; arguments that do not fit a tool's type are the protocol's invalid
//! params, -32602), and leaves the terminals running when it ends: they belong to the
//! state directory. It must not kill anything on its own.
//!
//! The tools' arguments are the verb layer's requests and their results its
//! answers ([`crate::verbs`]), the same JSON as the CLI's `--json` output
//! and the HTTP API for the same verb, as structured content and as text,
//! bounded as a whole by the verb layer (`max_bytes`, default 64 KiB).
//! Each tool's name, description, annotations (`readOnlyHint`, ...) and
//! schemas are its verb's entry in the verb table ([`crate::verbs::VERBS`]).
//! MCP's own parts are the choice of tools ([`ToolSelection`]:
//! `--read-only`, `--tools`, `--exclude-tools`), a send's progress, and
//! bounding the text of the answers the verb layer does not bound (screen,
//! wait, errors) to `MAX_ANSWER_BYTES`.

mod guard;
mod schema;
mod tools;
pub(crate) mod transport;

pub use guard::Guard;
pub use schema::TOOL_LIST_BUDGET;

use std::future::Future;

use rmcp::ServiceExt;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;

use crate::registry::{Owned, OwnerId, Registry};
use crate::verbs::{MAX_ANSWER_BYTES, VERBS, keep_tail_json};
use crate::{Error, Result};

/// The MCP server: the tools over one registry, acting for one owner.
#[derive(Clone)]
pub struct McpServer {
    registry: Registry,
    owner: OwnerId,
    tool_router: ToolRouter<McpServer>,
    guard: std::sync::Arc<Guard>,
    /// `--read-only`: its reads and waits never recreate a dead
    /// `on-attach` terminal (that starts a program).
    read_only: bool,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// Tools over `registry`, every call made as `owner`.
    pub fn new(registry: Registry, owner: OwnerId) -> McpServer {
        McpServer {
            registry,
            owner,
            tool_router: tools::router(),
            guard: std::sync::Arc::new(Guard::default()),
            read_only: false,
        }
    }

    /// The registry as this server's owner uses it (read-only under
    /// `--read-only`).
    fn owned(&self) -> Owned<'_> {
        let owned = self.registry.owner(&self.owner);
        if self.read_only {
            owned.read_only()
        } else {
            owned
        }
    }

    /// The same server checking every send's text against `guard` before
    /// it is typed.
    #[must_use]
    pub fn with_guard(mut self, guard: Guard) -> McpServer {
        self.guard = std::sync::Arc::new(guard);
        self
    }

    /// The same server offering only the tools `selection` lets through:
    /// the others are neither listed nor callable.
    ///
    /// # Errors
    /// As [`ToolSelection::resolve`].
    pub fn select(mut self, selection: &ToolSelection) -> Result<McpServer> {
        let keep = selection.resolve()?;
        self.read_only = selection.read_only;
        for tool in self.tool_router.list_all() {
            if !keep.iter().any(|name| *name == tool.name) {
                self.tool_router.remove_route(&tool.name);
            }
        }
        Ok(self)
    }

    /// The names of the tools this server offers, sorted.
    pub fn tool_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .tool_router
            .list_all()
            .into_iter()
            .map(|tool| tool.name.into_owned())
            .collect();
        names.sort();
        names
    }
}

/// Which tools a server offers (`tmux-engine mcp --read-only`, `--tools`,
/// `--exclude-tools`). A name is a tool's (`terminal_read`) or its verb's
/// (`read`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolSelection {
    /// Only the tools that change nothing (their `readOnlyHint`): list,
    /// show, read, screen, wait, search.
    pub read_only: bool,
    /// Only these tools (`None`: all).
    pub tools: Option<Vec<String>>,
    /// Never these tools.
    pub exclude_tools: Vec<String>,
}

impl ToolSelection {
    /// The names of the tools this selection offers, sorted; checked with
    /// no registry, so a bad selection stops `mcp` before anything runs.
    ///
    /// # Errors
    /// `INVALID_INPUT` for a name that is not one of the tools (a typo
    /// must never widen or empty the set silently), a tool that is not
    /// read-only named in `tools` beside `read_only`, or a selection that
    /// leaves no tool.
    pub fn resolve(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> = VERBS.iter().map(|verb| verb.tool.to_owned()).collect();
        names.sort();
        let full = |given: &[String]| -> Result<Vec<String>> {
            given
                .iter()
                .map(|name| {
                    let full = if name.starts_with("terminal_") {
                        name.clone()
                    } else {
                        format!("terminal_{name}")
                    };
                    if names.contains(&full) {
                        Ok(full)
                    } else {
                        Err(Error::InvalidInput(format!(
                            "no tool {name:?}; the tools are {}",
                            names.join(", ")
                        )))
                    }
                })
                .collect()
        };
        let only = self.tools.as_deref().map(full).transpose()?;
        let exclude = full(&self.exclude_tools)?;
        let mut keep = Vec::new();
        for verb in VERBS {
            let (name, read_only) = (verb.tool.to_owned(), verb.read_only);
            let named = only.as_ref().is_none_or(|only| only.contains(&name));
            if self.read_only && !read_only && only.is_some() && named {
                return Err(Error::InvalidInput(format!(
                    "--tools names {name}, which is not read-only, beside --read-only"
                )));
            }
            if named && !exclude.contains(&name) && (read_only || !self.read_only) {
                keep.push(name);
            }
        }
        if keep.is_empty() {
            return Err(Error::InvalidInput(
                "the tool selection leaves no tool".to_owned(),
            ));
        }
        keep.sort();
        Ok(keep)
    }
}

/// Serves `server` on stdin/stdout until the client closes its end or
/// `stop` resolves (e.g. on SIGTERM). The registry is left as it is: the
/// caller shuts it down, and the terminals keep running.
///
/// # Errors
/// `IO` when the protocol's initialization fails or the service ends with
/// an error.
pub async fn serve(server: McpServer, stop: impl Future<Output = ()>) -> Result<()> {
    // `stdio_pipes` reads a pipe through the reactor, so a stop never waits
    // on a blocked read of stdin (tokio's `stdin()` would hold the runtime
    // open until the client writes or closes).
    let (read, write) = rmcp::transport::io::stdio_pipes();
    serve_on(server, transport::LineTransport::new(read, write), stop).await
}

/// [`serve`] over any transport rmcp accepts (a pair of pipes, a duplex
/// stream).
///
/// # Errors
/// As for [`serve`].
pub(crate) async fn serve_on<T, E, A>(
    server: McpServer,
    transport: T,
    stop: impl Future<Output = ()>,
) -> Result<()>
where
    T: rmcp::transport::IntoTransport<rmcp::RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let mcp_error = |what: &str, e: &dyn std::fmt::Display| {
        Error::io(what.to_owned(), std::io::Error::other(e.to_string()))
    };
    let running = server
        .serve(transport)
        .await
        .map_err(|e| mcp_error("initializing the MCP session", &e))?;
    let stopper = running.cancellation_token();
    tokio::pin!(stop);
    let waiting = running.waiting();
    tokio::pin!(waiting);
    let quit = tokio::select! {
        quit = &mut waiting => quit,
        () = &mut stop => {
            stopper.cancel();
            waiting.await
        }
    };
    let quit = quit.map_err(|e| mcp_error("serving MCP", &e))?;
    tracing::info!(reason = ?quit, "mcp session ended");
    Ok(())
}

/// A successful result: `value` as structured content and as JSON text.
fn success(value: &impl Serialize) -> CallToolResult {
    match serde_json::to_value(value) {
        Ok(value) => CallToolResult::structured(value),
        Err(e) => failure(&Error::io(
            "encoding a tool result",
            std::io::Error::other(e),
        )),
    }
}

/// A tool error: `CODE: message`, bounded like any other text.
fn failure(error: &Error) -> CallToolResult {
    let mut text = format!("{}: {error}", error.code());
    keep_tail_json(&mut text, MAX_ANSWER_BYTES);
    CallToolResult::error(vec![ContentBlock::text(text)])
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Each verb of the table is one tool, described and annotated by its
    /// entry, with an object schema for its arguments.
    #[test]
    fn every_verb_is_a_tool_as_its_entry_says() {
        let tools = tools::router().list_all();
        assert_eq!(tools.len(), VERBS.len());
        for verb in VERBS {
            let tool = tools.iter().find(|tool| tool.name == verb.tool).unwrap();
            assert_eq!(tool.description.as_deref(), Some(verb.description));
            let hints = tool.annotations.as_ref().unwrap();
            assert_eq!(hints.read_only_hint, Some(verb.read_only), "{}", verb.tool);
            assert_eq!(hints.destructive_hint, Some(verb.destructive));
            assert_eq!(tool.input_schema["type"], "object", "{}", verb.tool);
            assert!(tool.input_schema["properties"].is_object(), "{}", verb.tool);
            assert!(tool.output_schema.is_some(), "{}", verb.tool);
        }
    }

    /// Every agent pays for the tool list in its context,
    /// so all of it (names, descriptions, annotations, both schemas) stays
    /// within the budget.
    #[test]
    fn the_tool_list_fits_its_budget() {
        let tools = tools::router().list_all();
        let list = rmcp::model::ListToolsResult::with_all_items(tools);
        let bytes = serde_json::to_vec(&list).unwrap().len();
        assert!(bytes <= TOOL_LIST_BUDGET, "tools/list is {bytes} bytes");
    }
}
