//! `ServerLink`: what a tmux terminal's tasks share: the control client,
//! the server handle, the output stream (which sends read back and
//! viewers are fed from), and the status watch.
//!
//! Below `terminal.rs` (the terminal), `watcher.rs` (its watcher), `send.rs` and
//! `pages.rs`, which all use it; it uses none of them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    /// Vouches for the status, the pane's process and the program `pid`
    /// names (see `TmuxTerminal::listing_stamp`).
    pub listing: ListingStamp,
    /// New pane streams after a respawn, for the watcher.
    pub restream: mpsc::Sender<PaneStream>,
    /// Stops the watcher (drop, close or shutdown).
    pub stop: CancellationToken,
    /// The watcher task (closed once it is spawned).
    pub tasks: TaskTracker,
    pub closed: AtomicBool,
}

/// A count bumped after every change of what `status` and `pid` answer,
/// and whether `pid` has found the program of the pane's present process
/// while it runs (before that, and once it ended, each `pid` looks in
/// `/proc` and may answer otherwise with no change here): `list` takes a
/// terminal's kept answer on its word instead of reading the status
/// watch and the mutex per terminal per list.
///
/// Packed in one word (the count above bit 0, the program found in bit 0)
/// so that a reader needs one load.
#[derive(Default)]
pub(super) struct ListingStamp(AtomicU64);

impl ListingStamp {
    /// After a change: bumps the count; `found` tells whether `pid` now
    /// answers its program from what it found.
    pub(super) fn changed(&self, found: bool) {
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |word| {
                Some((((word >> 1) + 1) << 1) | u64::from(found))
            });
    }

    /// The count, once `pid` has its program; `None` before.
    pub(super) fn get(&self) -> Option<u64> {
        let word = self.0.load(Ordering::Acquire);
        (word & 1 == 1).then_some(word >> 1)
    }
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
                // Under the watch's lock and before its receivers wake: a
                // list they make sees the count moved (`pid` looks again
                // once the program's end is known, see `TmuxTerminal::pid`).
                self.listing.changed(false);
                true
            }
        });
    }

    /// Sets the pane's process (a respawn's): `pid` finds its program
    /// again.
    pub(super) fn set_pane_process(&self, process: Option<ProcessId>) {
        let mut mutable = self.lock();
        mutable.pane_process = process;
        // Under the mutex, as `pid`'s record of a program found is: a find
        // for the old process cannot mark the new one found.
        self.listing.changed(false);
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
