//! `ServerLink`: what a tmux terminal's tasks share: the control client,
//! the server handle, the output stream (which sends read back and
//! viewers are fed from), and the status watch.
//!
//! Below `terminal.rs` (the terminal and its watcher), `send.rs` and
//! `pages.rs`, which all use it; it uses none of them.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::debug;

use super::TmuxConfig;
use crate::Result;
use crate::control::PaneId;
use crate::control::client::{ControlClient, PaneStream};
use crate::registry::seam::TerminalStatus;
use crate::registry::{SpawnSpec, TerminalId};
use crate::stream::Stream;
use crate::tmux::command::TmuxCommand;
use crate::tmux::{ProcessId, ServerHandle};

/// What changes while the terminal runs, behind a std mutex (never held
/// across an await).
pub(super) struct Mutable {
    /// The pane's process, with its start time (the kill path's guard
    /// against a recycled pid); `None` when not known.
    pub pane_process: Option<ProcessId>,
    /// The send in flight, so `close` can end it.
    pub active_send: Option<CancellationToken>,
    /// The program behind the exit handshake's wrapper, as last found
    /// for `pane_process` (see `TmuxTerminal::pid`): `list` asks every
    /// terminal's pid, and finding it is three reads of `/proc`.
    pub program: Option<(ProcessId, ProcessId)>,
    /// Whether this process asked the pane's relay to keep the history
    /// (`keep_history`): a relay that replaces it is asked again.
    pub keeps: bool,
}

/// Everything the terminal's tasks share.
pub(super) struct ServerLink {
    pub id: TerminalId,
    /// The pane's output, at most `config.output_buffer` bytes held,
    /// counted in the epoch of the pane's relay (every process's cursors
    /// agree); a new epoch when a relay is replaced.
    pub stream: Arc<Stream>,
    pub spec: SpawnSpec,
    pub config: Arc<TmuxConfig>,
    pub client: ControlClient,
    pub pane: PaneId,
    /// Serializes `close` (and knows the server's pid and directory).
    pub server: tokio::sync::Mutex<ServerHandle>,
    /// The same server, never locked: what `attach_command` and the
    /// locator name.
    pub address: ServerHandle,
    pub mutable: Mutex<Mutable>,
    pub status: watch::Sender<TerminalStatus>,
    /// New pane streams after a respawn, for the watcher.
    pub restream: mpsc::Sender<PaneStream>,
    /// Stops the watcher (drop, close or shutdown).
    pub stop: CancellationToken,
    /// The watcher task (closed once it is spawned).
    pub tasks: TaskTracker,
    pub closed: AtomicBool,
}

impl ServerLink {
    pub(super) fn lock(&self) -> MutexGuard<'_, Mutable> {
        self.mutable.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets the status, waking watchers only when it changed.
    pub(super) fn set_status(&self, status: TerminalStatus) {
        self.status.send_if_modified(|current| {
            if *current == status {
                false
            } else {
                debug!(terminal = %self.id, %status, "status changed");
                *current = status;
                true
            }
        });
    }

    /// Brings this process's stream up to all the pane's relay has read:
    /// an answer about the shell's marks (is a command running, which
    /// commands ran) then counts every mark printed before it was asked,
    /// though the bytes were still on their way to this process on a
    /// loaded machine. Bounded by the probe timeout: a relay that does not
    /// answer (stopped) leaves the stream as it is.
    pub(super) async fn catch_up(&self) {
        let drained = self.client.drain_raw(self.pane);
        if tokio::time::timeout(self.config.probe_timeout, drained)
            .await
            .is_err()
        {
            debug!(terminal = %self.id, "the output relay did not hand over in time");
        }
    }

    /// Runs `command` on the terminal's control client.
    pub(super) async fn command(&self, command: &TmuxCommand) -> Result<crate::control::Reply> {
        self.client.command(command).await
    }
}
