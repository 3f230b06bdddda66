//! One snapshot of a pane as tmux sees it: size, cursor, mode, the screen
//! and recent history with attributes (`list-panes` + `capture-pane -e`).
//!
//! What a late joiner or a lagging viewer is repainted from; the client's
//! own resync sends the same two commands from inside its reader.

use super::PaneId;
use super::client::ControlClient;
use super::subscribe::{PaneInfo, Snapshot};
use crate::Result;
use crate::tmux::command::TmuxCommand;

/// tmux's view of `pane`: cursor, size, mode, screen and `history` lines
/// above it, with SGR attributes.
///
/// # Errors
/// As [`ControlClient::command`] (`SERVER_GONE`, `COMMAND_FAILED` for a
/// pane that does not exist).
pub async fn capture_snapshot(
    client: &ControlClient,
    pane: PaneId,
    history: usize,
) -> Result<Snapshot> {
    let info = TmuxCommand::new("list-panes")
        .target(pane)
        .opt("-F", PaneInfo::FORMAT);
    let capture = TmuxCommand::new("capture-pane")
        .flag("-p")
        .flag("-e")
        .target(pane)
        .opt("-S", format!("-{history}"));
    // Both queued before either is answered: nothing runs in between.
    let (info, lines) = tokio::join!(client.command(&info), client.command(&capture));
    let info = info?;
    let lines = lines?.lines;
    let info = info
        .lines
        .first()
        .and_then(|l| PaneInfo::parse(l))
        .unwrap_or_default();
    Ok(Snapshot::from_capture(pane, info, lines))
}
