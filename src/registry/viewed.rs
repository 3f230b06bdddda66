//! What a viewer gets of a terminal: [`ViewedTerminal`], a small concrete
//! handle over the backend's terminal that can stream, type, resize and
//! repaint, and give the PTY transport its attach command and lock, but
//! never close, respawn or shut it down: those stay behind the registry's
//! checks (owner fencing, one close at a time, records).

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::watch;

use super::seam::{
    AttachLock, BackendTerminal, OutputStream, Screen, Snapshot, TerminalStatus, WriteAnswer,
};
use crate::Result;
use crate::stream::Stream;
use crate::vocab::Size;

/// A live terminal as a viewer may use it, from
/// [`Owned::attach`](super::Owned::attach). Cheap to clone; clones
/// are the [`same`](Self::same) terminal.
#[derive(Clone)]
pub struct ViewedTerminal(Arc<dyn BackendTerminal>);

impl std::fmt::Debug for ViewedTerminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ViewedTerminal")
            .field(&self.0.status())
            .finish()
    }
}

impl ViewedTerminal {
    pub(crate) fn new(terminal: Arc<dyn BackendTerminal>) -> Self {
        ViewedTerminal(terminal)
    }

    /// Whether both are one backend terminal: a rebuilt terminal (same id,
    /// new server) is another one, which viewers must re-subscribe to.
    pub fn same(&self, other: &ViewedTerminal) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.0), Arc::as_ptr(&other.0))
    }

    /// What the terminal's record says to find it again (for tmux its
    /// socket, session and pane): which backend terminal a viewer holds.
    pub fn locator(&self) -> serde_json::Value {
        self.0.locator()
    }

    /// The live output from now on (see [`OutputStream`]): what `wait`,
    /// `record` and `events` follow.
    ///
    /// # Errors
    ///
    /// When the terminal is gone.
    pub(crate) fn output(&self) -> Result<OutputStream> {
        self.0.output()
    }

    /// The terminal's output stream, which viewers are fed from.
    ///
    /// # Errors
    ///
    /// `UNSUPPORTED` when the backend keeps none.
    pub(crate) fn stream(&self) -> Result<Arc<Stream>> {
        super::seam::stream_of(&*self.0)
    }

    /// Types `bytes` into the program exactly.
    ///
    /// # Errors
    ///
    /// When the terminal is gone or its program is dead.
    pub async fn write(&self, bytes: Bytes) -> Result<()> {
        self.0.write(bytes).await
    }

    /// Types `bytes` into the program exactly, returning once they are
    /// queued behind every earlier write, with the write's answer still to
    /// come (see [`BackendTerminal::write_queued`]).
    ///
    /// # Errors
    ///
    /// When the terminal is gone before the bytes were queued; later
    /// failures come in the answer.
    pub async fn write_queued(&self, bytes: Bytes) -> Result<WriteAnswer> {
        self.0.write_queued(bytes).await
    }

    /// Resizes the terminal; the program gets SIGWINCH.
    ///
    /// # Errors
    ///
    /// When the terminal is gone.
    pub async fn resize(&self, size: Size) -> Result<()> {
        self.0.resize(size).await
    }

    /// The screen and `history` lines above it, with attributes and the
    /// cursor, for a repaint.
    ///
    /// # Errors
    ///
    /// When the terminal cannot be read.
    pub async fn snapshot(&self, history: usize) -> Result<Snapshot> {
        self.0.snapshot(history).await
    }

    /// The visible screen (where a backend has no snapshots).
    ///
    /// # Errors
    ///
    /// When the terminal cannot be read.
    pub async fn screen(&self) -> Result<Screen> {
        self.0.screen().await
    }

    /// Status changes, pushed by the backend; a dropped sender means gone.
    pub fn watch_status(&self) -> watch::Receiver<TerminalStatus> {
        self.0.watch_status()
    }

    /// The command attaching a person's terminal to this one (for tmux:
    /// `tmux -S SOCKET attach-session -t =SESSION`, `-r` when `read_only`).
    ///
    /// # Errors
    ///
    /// `UNSUPPORTED` when the backend has none.
    pub fn attach_command(&self, read_only: bool) -> Result<std::process::Command> {
        self.0.attach_command(read_only)
    }

    /// The server's control-mode notifications (for `events`).
    pub(crate) fn events(
        &self,
    ) -> Result<tokio::sync::broadcast::Receiver<crate::control::Notification>> {
        self.0.events()
    }

    /// The guard to hold while [`attach_command`](Self::attach_command)'s
    /// client attaches (for tmux: the server's handshake lock).
    pub async fn attach_lock(&self) -> AttachLock {
        self.0.attach_lock().await
    }
}
