//! `mcp`: the MCP server on stdio over the registry of the state directory,
//! for the owner of the global flags. The server itself is the library's
//! `tmux_engine::mcp`; this only opens the registry the way every registry
//! command does, and lets go of it (terminals running) at the end.

use tmux_engine::mcp::{McpServer, serve};

use super::args::Global;
use super::report::CliError;
use super::terminals::{DETACH_WAIT, open_registry, owner};

/// Serves until the client closes stdin, or SIGINT/SIGTERM.
///
/// # Errors
/// The registry's errors on opening it, or the protocol's on starting.
pub async fn run(global: &Global) -> std::result::Result<(), CliError> {
    let owner = owner(global)?;
    // Before anything attaches, as for the other registry commands: a
    // signal from here on ends through the detach below (see
    // `ClientOptions::handshake_lock`).
    let mut interrupts = super::run::Interrupts::register()?;
    // Long-lived: this process runs the `always` restart loops.
    let registry = open_registry(global, true, None).await?;
    let stop = async move {
        let signal = interrupts.recv().await;
        tracing::info!(
            signal,
            "mcp: stopping on a signal; the terminals keep running"
        );
    };
    let result = serve(McpServer::new(registry.clone(), owner), stop).await;
    // The terminals keep running; wait until every control connection is
    // detached, so none is cut off by the runtime's end.
    let _ = tokio::time::timeout(DETACH_WAIT, registry.shutdown()).await;
    Ok(result?)
}
