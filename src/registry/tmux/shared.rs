//! What a tmux terminal's tasks share: the control client, the server
//! handle, the output ring sends read back, and the status watch.
//!
//! Below `terminal.rs` (the terminal and its watcher), `send.rs` and
//! `capture.rs`, which all use it; it uses none of them.

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::debug;

use super::TmuxConfig;
use crate::Result;
use crate::control::PaneId;
use crate::control::client::{ControlClient, PaneStream};
use crate::registry::backend::TerminalStatus;
use crate::registry::{SpawnSpec, TerminalId};
use crate::tmux::command::TmuxCommand;
use crate::tmux::{ProcessId, ServerHandle};

/// What changes while the terminal runs, behind a std mutex (never held
/// across an await).
pub(super) struct Mutable {
    /// The most recent output, at most `config.output_buffer` bytes.
    pub ring: VecDeque<u8>,
    /// Bytes of output seen in all; the ring ends at this offset.
    pub total: u64,
    /// Times output was skipped (a resync replaced it).
    pub gaps: u64,
    /// The pane's process, with its start time (the kill path's guard
    /// against a recycled pid).
    pub pane_process: ProcessId,
    /// The send in flight, so `close` can end it.
    pub active_send: Option<CancellationToken>,
}

/// Everything the terminal's tasks share.
pub(super) struct Shared {
    pub id: TerminalId,
    pub spec: SpawnSpec,
    pub config: Arc<TmuxConfig>,
    pub client: ControlClient,
    pub pane: PaneId,
    /// Serializes `close` (and knows the server's pid and directory).
    pub server: tokio::sync::Mutex<ServerHandle>,
    /// The same server, never locked: what `attach_command` names.
    pub address: ServerHandle,
    pub mutable: Mutex<Mutable>,
    /// The output byte count, bumped on every chunk: waiters watch it.
    pub output: watch::Sender<u64>,
    pub status: watch::Sender<TerminalStatus>,
    /// New pane streams after a respawn, for the watcher.
    pub restream: mpsc::Sender<PaneStream>,
    /// Stops the watcher (drop, close or shutdown).
    pub stop: CancellationToken,
    /// The watcher task (closed once it is spawned).
    pub tasks: TaskTracker,
    pub closed: AtomicBool,
}

impl Shared {
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

    pub(super) fn push_output(&self, bytes: &[u8]) {
        let total = {
            let mut mutable = self.lock();
            let limit = self.config.output_buffer;
            let bytes = if bytes.len() > limit {
                &bytes[bytes.len() - limit..]
            } else {
                bytes
            };
            let overflow = (mutable.ring.len() + bytes.len()).saturating_sub(limit);
            mutable.ring.drain(..overflow);
            mutable.ring.extend(bytes);
            mutable.total += bytes.len() as u64;
            mutable.total
        };
        self.output.send_replace(total);
    }

    /// Runs `command` on the terminal's control client.
    pub(super) async fn command(&self, command: &TmuxCommand) -> Result<crate::control::Reply> {
        self.client.command(command).await
    }
}

/// Output bytes from absolute offset `start` to now, and whether some were
/// dropped (older than the ring, or skipped by a resync after `gaps`).
pub(super) fn output_since(shared: &Shared, start: u64, gaps: u64) -> (Bytes, bool) {
    let mutable = shared.lock();
    let ring_start = mutable.total - mutable.ring.len() as u64;
    let from = start.max(ring_start);
    let skip = usize::try_from(from - ring_start).unwrap_or(usize::MAX);
    let bytes: Vec<u8> = mutable.ring.iter().skip(skip).copied().collect();
    (
        Bytes::from(bytes),
        start < ring_start || mutable.gaps != gaps,
    )
}
