//! `mcp`: the MCP server on stdio over the registry of the state directory,
//! for the owner of the global flags. The server itself is the library's
//! `tmux_engine::mcp`; this only opens the registry the way every registry
//! command does, and lets go of it (terminals running) at the end.

use clap::Args;
use tmux_engine::mcp::{Guard, McpServer, ToolSelection, serve};

use super::args::Global;
use super::report::CliError;
use super::terminals::{DETACH_WAIT, owner};

/// `mcp`'s arguments: which tools the agent gets.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct McpArgs {
    /// Only the tools that change nothing: list, show, read, screen,
    /// wait, search.
    #[arg(long)]
    pub(crate) read_only: bool,
    /// Only these tools (comma-separated names, `terminal_read` or `read`).
    #[arg(long, value_delimiter = ',', value_name = "TOOL,...")]
    pub(crate) tools: Option<Vec<String>>,
    /// Never these tools (comma-separated names).
    #[arg(long, value_delimiter = ',', value_name = "TOOL,...")]
    pub(crate) exclude_tools: Vec<String>,
    /// Refuse a send whose text matches REGEX (`FORBIDDEN_COMMAND`,
    /// nothing typed); repeatable.
    #[arg(long, value_name = "REGEX")]
    pub(crate) deny: Vec<String>,
    /// Type a command line at a shell's prompt only when each of its
    /// lines matches one of these (`FORBIDDEN_COMMAND` else); repeatable.
    #[arg(long, value_name = "REGEX")]
    pub(crate) allow: Vec<String>,
    /// More rules, one a line: `deny:REGEX` or `allow:REGEX` (`#`
    /// comments).
    #[arg(long, value_name = "FILE")]
    pub(crate) policy: Option<std::path::PathBuf>,
    /// Do not check a bash or sh command line with `bash -n`/`sh -n`
    /// before typing it (checked by default: `SYNTAX_ERROR`, nothing
    /// typed).
    #[arg(long)]
    pub(crate) no_syntax_check: bool,
    /// Spawns keep their history on disk unless they say otherwise
    /// (`keep_history`): terminals come back after a reboot.
    #[arg(long)]
    pub(crate) keep_history: bool,
}

/// Serves until the client closes stdin, or SIGINT/SIGTERM.
///
/// # Errors
/// `INVALID_INPUT` for a tool selection naming an unknown tool (before
/// anything opens), the registry's errors on opening it, or the
/// protocol's on starting.
pub async fn run(global: &Global, args: McpArgs) -> std::result::Result<(), CliError> {
    let selection = ToolSelection {
        read_only: args.read_only,
        tools: args.tools,
        exclude_tools: args.exclude_tools,
    };
    let tools = selection.resolve()?;
    let guard = Guard::new(
        &args.deny,
        &args.allow,
        args.policy.as_deref(),
        !args.no_syntax_check,
    )?;
    tracing::info!(tools = tools.join(","), "mcp: offering these tools");
    let owner = owner(global)?;
    // Before anything attaches, as for the other registry commands: a
    // signal from here on ends through the detach below (see
    // `ClientOptions::handshake_lock`).
    let mut interrupts = super::run::Interrupts::register()?;
    // Long-lived: this process runs the `always` restart loops.
    let registry =
        super::terminals::open_registry_keeping(global, true, None, args.keep_history).await?;
    super::terminals::reap_at_start(&registry);
    let stop = async move {
        let signal = interrupts.recv().await;
        tracing::info!(
            signal,
            "mcp: stopping on a signal; the terminals keep running"
        );
    };
    let server = McpServer::new(registry.clone(), owner)
        .select(&selection)?
        .with_guard(guard);
    let result = serve(server, stop).await;
    // The terminals keep running; wait until every control connection is
    // detached, so none is cut off by the runtime's end.
    let _ = tokio::time::timeout(DETACH_WAIT, registry.shutdown()).await;
    Ok(result?)
}
