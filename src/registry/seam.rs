//! The seam between the registry and terminal mechanics: the [`Backend`] and
//! [`BackendTerminal`] traits and the values that cross them.
//!
//! A backend owns how a terminal runs (for tmux: one private server per
//! terminal, driven through the control client); the registry owns ids,
//! owners, publication, fencing, policy and persistence. Nothing here knows
//! about owners' rights or about tmux.
//!
//! Both traits are object-safe: the registry stores `Arc<dyn Backend>` and
//! `Arc<dyn BackendTerminal>`. Async methods return
//! [`BoxFuture`](futures_util::future::BoxFuture)s.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use super::signal::{Signal, SignalDelivery};
use super::{OwnerId, SpawnSpec, TerminalId};
use crate::control::Notification;
pub(crate) use crate::control::client::PaneEvent as OutputEvent;
pub(crate) use crate::control::subscribe::Snapshot;
pub(crate) use crate::screen::Screen;
use crate::statedir::{CorruptRecord, TerminalRecord};
use crate::stream::Stream;
use crate::vocab::Size;
use crate::{Error, Result};

/// A live stream of a terminal's output: exact bytes in order; after a lag,
/// one [`OutputEvent::Resync`] snapshot replaces what the reader missed,
/// then live bytes again. Ends when the terminal is gone.
pub type OutputStream = BoxStream<'static, OutputEvent>;

/// A kind of terminal the registry can spawn, e.g. `tmux`.
///
/// # Contract
///
/// - [`spawn`](Backend::spawn) must honour its [`SpawnRequest::cancel`]
///   token promptly. The registry always awaits the returned future to its
///   end (it never drops a spawn half-way, so nothing leaks); a backend that
///   ignores the token delays the caller and any disposal.
/// - When `spawn` stops because of the token and undoing its own half-made
///   work fails, it returns [`Error::BackendCleanup`] carrying both; the
///   registry keeps the cleanup failure until disposal reports it.
/// - When `spawn` succeeds but the registry then decides not to publish the
///   terminal (cancelled meanwhile, registry disposing, persistence failed), the
///   registry calls [`BackendTerminal::close`] with
///   [`CloseReason::RolledBack`].
/// - The same id may be spawned again to rebuild a terminal whose server
///   vanished (restart policy); the backend must cope with leftovers of the
///   old one (e.g. a stale socket file).
pub trait Backend: Send + Sync + 'static {
    /// The name snapshots and records report for this backend's
    /// terminals (`tmux`).
    fn kind(&self) -> &str;

    /// Starts a terminal for `request` and resolves once it is ready.
    ///
    /// # Errors
    ///
    /// Whatever setup failed; [`Error::BackendCleanup`] when the spawn was
    /// cancelled and the backend's own cleanup failed.
    fn spawn(&self, request: SpawnRequest) -> BoxFuture<'_, Result<Arc<dyn BackendTerminal>>>;

    /// Re-attaches to a terminal described by a persisted record, after the
    /// engine restarted.
    ///
    /// Returns `Ok(None)` when the terminal is dead or gone (its server or
    /// session no longer exists); the registry then keeps the record as
    /// `gone`, recreatable by its restart policy. The default adopts nothing.
    ///
    /// # Errors
    ///
    /// When it cannot tell (e.g. the state is unreadable); the registry
    /// reports the error and also keeps the record as `gone`.
    fn adopt<'a>(
        &'a self,
        record: &'a TerminalRecord,
    ) -> BoxFuture<'a, Result<Option<Arc<dyn BackendTerminal>>>> {
        let _ = record;
        Box::pin(async { Ok(None) })
    }

    /// Tells a recorded terminal's status cheaply, without attaching to it
    /// (for tmux: the server's socket, the pane process's pid and start
    /// time, a one-shot query only for a dead pane): what `list` and
    /// `show` use, so they never hold a connection per terminal. `None`
    /// when the backend cannot tell that way; the registry then adopts the
    /// terminal at once, as [`adopt`](Backend::adopt) does. The default:
    /// `None`.
    ///
    /// A backend answering `Some` is adopted lazily: the registry calls
    /// [`adopt`](Backend::adopt) only when a command needs the live
    /// terminal (send, read, probe, ...).
    fn check<'a>(&'a self, record: &'a TerminalRecord) -> BoxFuture<'a, Option<RecordCheck>> {
        let _ = record;
        Box::pin(async { None })
    }

    /// Ends whatever may remain of a recorded terminal this process holds
    /// no live handle on (for tmux: the kill path on the recorded server
    /// directory, guarded by the recorded pids and start times), before
    /// the registry replaces it or forgets it. Must be idempotent, and must
    /// fail rather than leave a server that may still run: the registry
    /// then does not start a second one. The default does nothing.
    ///
    /// # Errors
    ///
    /// When something of the terminal may still run.
    fn retire<'a>(&'a self, record: &'a TerminalRecord) -> BoxFuture<'a, Result<()>> {
        let _ = record;
        Box::pin(async { Ok(()) })
    }

    /// Removes what belongs to no record: e.g. socket files with no
    /// server, servers proven to have no record. `records` are every
    /// readable record in the state directory;
    /// `claimed` is every terminal id with a record file, readable or not
    /// (a corrupt record still claims its terminal). Only what is proven
    /// unclaimed may go: a terminal that cannot be identified, or a query
    /// that failed, means "unknown" and is left alone (listed in
    /// [`ReapReport::skipped`]). The default reaps nothing.
    ///
    /// Another process sharing the state directory may be spawning right
    /// now: its server exists a moment before its record is written (records
    /// are written after setup, before publication). Skip anything younger
    /// than a grace period (e.g. a minute) rather than reap it.
    ///
    /// # Errors
    ///
    /// When reaping could not be attempted at all; per-item failures belong
    /// in [`ReapReport::failures`].
    fn reap<'a>(
        &'a self,
        records: &'a [TerminalRecord],
        claimed: &'a [TerminalId],
    ) -> BoxFuture<'a, Result<ReapReport>> {
        let _ = (records, claimed);
        Box::pin(async { Ok(ReapReport::default()) })
    }

    /// Whether the backend can start terminals now, and its pool's
    /// counts: what `serve`'s `/readyz` and `/metrics` report. Cheap (no
    /// process is started): it is asked on every probe. The default is
    /// healthy with no pool.
    fn health(&self) -> BackendHealth {
        BackendHealth::default()
    }
}

/// What a backend says of itself to probes and metrics
/// ([`Backend::health`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BackendHealth {
    /// Why it cannot start terminals now (`None`: it can); no paths or
    /// names in it: an unauthenticated probe shows it.
    pub problem: Option<String>,
    /// Spawns a pre-started server served.
    pub pool_hits: u64,
    /// Spawns that found no pre-started server ready (with a pool).
    pub pool_misses: u64,
    /// Pre-started servers waiting now.
    pub pool_ready: usize,
}

/// Everything a backend needs to start one terminal.
#[derive(Debug, Clone)]
pub struct SpawnRequest {
    /// The registry-minted id; stable across recreation and engine restarts.
    pub id: TerminalId,
    /// The owner the terminal will belong to.
    pub owner: OwnerId,
    /// What to run and how (already validated by the registry).
    pub spec: SpawnSpec,
    /// Cancelled when the caller gives up or the registry is disposing; the backend must stop and clean up.
    pub cancel: CancellationToken,
    /// Print this first, before the program starts: a restore after a
    /// reboot. A backend that cannot may ignore it.
    pub restore: Option<Restore>,
}

/// What [`Backend::check`] found, without attaching.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordCheck {
    /// The status as far as the cheap check tells (`Running` when the
    /// server answers and its pane process lives, or when it cannot tell:
    /// unknown is never dead).
    pub status: TerminalStatus,
    /// The pane's process, when known.
    pub pid: Option<u32>,
}

/// What [`Backend::reap`] removed.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct ReapReport {
    /// Human-readable descriptions of what was removed, e.g. socket paths.
    pub removed: Vec<String>,
    /// What was left alone because it could not be proven unclaimed (a
    /// query failed or timed out, a server of another state directory or
    /// without the engine's identifying marks), and why.
    pub skipped: Vec<String>,
    /// Records moved aside as corrupt; their terminals were left alone
    /// (filled by [`Registry::reap`](super::Registry::reap)).
    pub corrupt: Vec<CorruptRecord>,
    /// What could not be removed, and why.
    pub failures: Vec<Error>,
    /// Server directories left alone only because they are younger than
    /// the grace period and could not be judged yet (a spawn in flight,
    /// perhaps one a crash cut short whose `tmux` is still starting): a
    /// later reap may find them unclaimed.
    pub young: usize,
}

/// One running (or dead but still present) terminal of a backend.
///
/// # Contract
///
/// - Dropping the last `Arc` releases local resources (e.g. the control
///   connection) but must not kill the terminal: terminals outlive the
///   engine. Only [`close`](BackendTerminal::close) kills.
/// - [`watch_status`](BackendTerminal::watch_status) pushes every status
///   change (death in particular) without the registry polling; dropping the
///   sender counts as `gone`.
/// - [`probe`](BackendTerminal::probe) asks the real world and updates what
///   [`status`](BackendTerminal::status) reports (pushing the change
///   through the watch, which is what wakes the `always` policy).
/// - While [`listing_stamp`](BackendTerminal::listing_stamp) gives the
///   same `Some`, [`status`](BackendTerminal::status),
///   [`pid`](BackendTerminal::pid) and
///   [`output_path`](BackendTerminal::output_path) give what they gave
///   after it was read.
pub trait BackendTerminal: Send + Sync + 'static {
    /// The pane's process id, when the backend has one.
    fn pid(&self) -> Option<u32>;

    /// Which way the terminal's output reaches the engine, for
    /// [`TerminalSnapshot::output_path`](crate::registry::TerminalSnapshot::output_path)
    /// (`"raw"`, `"control"`); `None` (the default) when the backend has
    /// no such notion.
    fn output_path(&self) -> Option<&'static str> {
        None
    }

    /// A number that moves on whenever what [`status`](Self::status),
    /// [`pid`](Self::pid) or [`output_path`](Self::output_path) answer may
    /// change, read before them; `None` (the default) when the backend
    /// cannot vouch for them (they are read each time). `list` keeps each
    /// terminal's answer with it: at 10,000 terminals, reading the three
    /// per terminal per list touched memory no other list use touches.
    fn listing_stamp(&self) -> Option<u64> {
        None
    }

    /// Backend-specific data persisted in the terminal's record so that
    /// [`Backend::adopt`] can find it again, e.g. `{"socket": "/run/.../t-1"}`.
    fn locator(&self) -> serde_json::Value;

    /// The last known status, without asking the backend's process.
    fn status(&self) -> TerminalStatus;

    /// A receiver of status changes, pushed by the backend (death within
    /// 100 ms for tmux).
    fn watch_status(&self) -> watch::Receiver<TerminalStatus>;

    /// Starts writing `request.text` to the terminal and watching what it
    /// prints: the handle's [`SendOperation`] reads the output from the
    /// stream it was made on (the terminal's, or one the backend feeds for
    /// the send), and the backend settles it with the reason it ended. The
    /// registry guarantees at most one send at a time.
    ///
    /// # Errors
    ///
    /// When the send cannot start at all; failures after the start are
    /// reported by its [`SendHandle::result`].
    fn start_send(&self, request: SendRequest) -> Result<SendHandle>;

    /// Reads one bounded page of scrollback, counted from the newest line.
    ///
    /// # Errors
    ///
    /// When the terminal cannot be read (e.g. its server is gone).
    fn read(&self, request: ReadRequest) -> BoxFuture<'_, Result<ReadPage>>;

    /// The terminal's output stream (see [`Stream`]): what cursor reads,
    /// the command list and attach viewers read. The default: a backend
    /// that keeps no stream (reads since a cursor are then `UNSUPPORTED`).
    fn stream(&self) -> Option<Arc<Stream>> {
        None
    }

    /// Hands the writing of the terminal's kept history to whatever reads
    /// its output for every process (the tmux backend's relay), from
    /// stream offset `from`: the first offset it keeps, or `None` (the
    /// default) when nothing does, and this process writes it itself.
    ///
    /// # Errors
    ///
    /// When the backend's keeper was asked and failed to answer.
    fn keep_history(
        &self,
        order: crate::history::keeper::KeepOrder,
        from: u64,
    ) -> BoxFuture<'_, Result<Option<u64>>> {
        let _ = (order, from);
        Box::pin(async { Ok(None) })
    }

    /// Brings [`stream`](BackendTerminal::stream) up to what the
    /// terminal's output holds for this process still on its way (a
    /// shared relay's bytes not yet read), so an answer about the shell's
    /// commands counts every mark printed before it was asked. Nothing
    /// (the default) for a backend whose stream is always current.
    fn catch_up(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    /// The terminal's working directory: its program's now, else the last
    /// one it reported (OSC 7). `None` (the default) when not known.
    fn working_directory(&self) -> Option<std::path::PathBuf> {
        None
    }

    /// The interactive shell the terminal runs (its spawn's `SHELL`, else
    /// the backend's pinned shell); `None` (the default) when it runs a
    /// command or a shell line, or the backend does not say.
    fn shell(&self) -> Option<std::path::PathBuf> {
        None
    }

    /// Captures the visible screen.
    ///
    /// # Errors
    ///
    /// When the terminal cannot be read.
    fn screen(&self) -> BoxFuture<'_, Result<Screen>>;

    /// Delivers `signal` as a real signal to the pane's foreground process
    /// group (never as typed bytes).
    ///
    /// # Errors
    ///
    /// When there is no process to signal or delivery failed.
    fn signal(&self, signal: Signal) -> BoxFuture<'_, Result<SignalDelivery>>;

    /// A live stream of the program's output from now on (see
    /// [`OutputStream`]); what attach viewers, `wait` and event printers
    /// read.
    ///
    /// # Errors
    ///
    /// When the terminal is gone.
    fn output(&self) -> Result<OutputStream>;

    /// Writes `bytes` to the program exactly, as typed input (no wait, no
    /// output tracking: that is [`start_send`](Self::start_send)).
    ///
    /// # Errors
    ///
    /// When the terminal is gone or its program is dead.
    fn write(&self, bytes: Bytes) -> BoxFuture<'_, Result<()>>;

    /// [`write`](Self::write), returning once the bytes are queued to the
    /// program in order behind every earlier write, with the write's answer
    /// still to come: what `write` would have returned, looked at when its
    /// caller next needs it (a viewer, with its next input), so the
    /// answer wakes no one on a keystroke's way to its echo. The default
    /// writes whole, then answers at once.
    ///
    /// # Errors
    ///
    /// When the terminal is gone before the bytes were queued; later
    /// failures come in the answer.
    fn write_queued(&self, bytes: Bytes) -> BoxFuture<'_, Result<WriteAnswer>> {
        Box::pin(async move {
            self.write(bytes).await?;
            Ok(answered())
        })
    }

    /// Resizes the terminal; the program gets SIGWINCH.
    ///
    /// # Errors
    ///
    /// When the terminal is gone.
    fn resize(&self, size: Size) -> BoxFuture<'_, Result<()>>;

    /// Every control-mode notification of the terminal's server, live, for
    /// a tmux-level event printer (`tmux-engine events`). A receiver that
    /// falls behind skips with `Lagged`. The default: backends without a
    /// control connection have none.
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] by default; when the terminal is gone.
    fn events(&self) -> Result<broadcast::Receiver<Notification>> {
        Err(Error::Unsupported(
            "this backend has no control-mode events".to_owned(),
        ))
    }

    /// A command that attaches a person's terminal to this one (for tmux:
    /// `tmux -S SOCKET attach-session -t =SESSION`, `-r` when
    /// `read_only`), run with the caller's stdio. The default: none.
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] by default.
    fn attach_command(&self, read_only: bool) -> Result<std::process::Command> {
        let _ = read_only;
        Err(Error::Unsupported(
            "this backend cannot attach a terminal".to_owned(),
        ))
    }

    /// The screen and recent history with attributes and cursor, for a
    /// viewer's repaint (for tmux: `list-panes` + `capture-pane -e` on the
    /// exact pane, `history` lines above the screen). The default: none.
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] by default; when the terminal cannot be read.
    fn snapshot(&self, history: usize) -> BoxFuture<'_, Result<Snapshot>> {
        let _ = history;
        Box::pin(async {
            Err(Error::Unsupported(
                "this backend has no snapshots".to_owned(),
            ))
        })
    }

    /// A guard to hold while a person's client attaches with
    /// [`attach_command`](Self::attach_command): it serialises that attach
    /// with the backend's own clients (for tmux: the per-server handshake
    /// lock, see `docs/tmux-quirks.md`). Hold it from before spawning the
    /// command until the client is attached, then drop it. The default:
    /// nothing to hold.
    fn attach_lock(&self) -> BoxFuture<'_, AttachLock> {
        Box::pin(async { AttachLock::none() })
    }

    /// Kills the terminal and its whole process tree and resolves when they
    /// are gone; ends any send in flight. May be called again after a
    /// failure.
    ///
    /// # Errors
    ///
    /// When the terminal could not be closed; the registry keeps it for a
    /// retry.
    fn close(&self, reason: CloseReason) -> BoxFuture<'_, Result<()>>;

    /// Releases this process's resources for the terminal (for tmux: stops
    /// the watcher and detaches the control client) and resolves when they
    /// are released, leaving the terminal itself running for a later
    /// [`Backend::adopt`]. Afterwards the terminal is unusable here.
    fn shutdown(&self) -> BoxFuture<'_, ()>;

    /// Asks whether the terminal is alive, using the right probe for its
    /// state (for tmux: `list-panes` on the exact target, control-client EOF,
    /// a reply deadline).
    ///
    /// # Errors
    ///
    /// When the probe itself could not run.
    fn probe(&self) -> BoxFuture<'_, Result<Liveness>>;

    /// Restarts the dead program in place (for tmux: `respawn-pane` on the
    /// live server), with the spec the terminal was spawned with.
    ///
    /// # Errors
    ///
    /// [`Error::ServerGone`] when there is no place left to respawn in; the
    /// registry then rebuilds the terminal through [`Backend::spawn`].
    fn respawn(&self) -> BoxFuture<'_, Result<()>>;
}

/// The terminal's output stream, or why it has none.
///
/// # Errors
///
/// `UNSUPPORTED` from a backend that keeps no stream.
pub(crate) fn stream_of(terminal: &dyn BackendTerminal) -> Result<Arc<Stream>> {
    terminal.stream().ok_or_else(|| {
        Error::Unsupported("this terminal keeps no output stream (no cursors)".to_owned())
    })
}

pub use super::send::{
    ExitCodeSource, SendAnswer, SendHandle, SendOperation, SendOutput, SendRequest, WaitFor,
    WaitReason,
};
pub use super::values::{
    AttachLock, CloseReason, Liveness, ReadPage, ReadRequest, Restore, TerminalStatus,
};

/// The answer to a [`BackendTerminal::write_queued`]: resolves with what
/// [`BackendTerminal::write`] would have returned. Dropping it drops the
/// answer, never the write.
pub type WriteAnswer = BoxFuture<'static, Result<()>>;

/// A [`WriteAnswer`] that is in already: the write succeeded.
pub(crate) fn answered() -> WriteAnswer {
    Box::pin(std::future::ready(Ok(())))
}
