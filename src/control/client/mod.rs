//! The control client: one task owns the connection to tmux, a link to
//! the server's socket (`tmux::client_protocol`, no process) or a
//! `tmux -C` process (`transport.rs` makes the two alike).
//!
//! Commands are pipelined: each is written as one line and its reply is
//! matched in order against a FIFO of pending commands. Only blocks with
//! `%begin` flags `1` (commands this client wrote) consume the FIFO; tmux's
//! own blocks (the attach command, hooks) come with flags `0` and are skipped.
//!
//! Four tasks per client (three with a server directory), plus one short-lived lag watcher per subscriber
//! that falls behind, all on the client's own [`TaskTracker`]:
//! - the reader (`reader.rs`) owns the child and its stdout (or the link's
//!   data socket and its link task) and never waits on anyone
//!   (except [`Delivery::Lossless`] subscribers, who asked for it): it routes
//!   output, completes replies and runs the flow control of `subscribe`;
//! - the writer writes queued lines to stdin in order, batching them (a
//!   line queued while it is idle is written by its caller: `stdin.rs`);
//! - a stderr drain keeps tmux's last words for the close reason, where
//!   the server has no directory to write them to a file in (a process
//!   only);
//! - a linked client's link task answers the server's messages
//!   (`tmux::client_protocol`) and ends with its `%exit` line;
//! - the reply watchdog (`watchdog.rs`) tells callers whose command is
//!   unanswered past the command timeout, with one timer for the client;
//! - a lag watcher waits for room in a lagging subscriber's queue, then
//!   starts its resync.
//! - the linger task (`linger.rs`), of a client asked to
//!   `unlink_when_idle`, lets an idle connection go and links again on the
//!   next use; the reader, writer and link task are then a connection's,
//!   the rest the client's.
//!
//! When tmux goes away (`%exit`, EOF, a crash) every pending command fails
//! with `SERVER_GONE`, every stream ends and [`ControlClient::closed`]
//! resolves with the reason once every task of the client has finished.
//! Shutdown is a value: [`ControlClient::detach`] resolves only when
//! `tmux -C` has exited (or the link closed), the handshake lock is
//! released and no task of the client is left; no program has to wait for
//! anything global. This module must not know how the server was started:
//! it takes a ready `Command`, or a server's socket to attach to.
//!
//! `shared.rs` holds what the handle and the tasks share (the state under
//! one lock and the locked writes); `connect.rs` starts a connection (the
//! process or the link, and its tasks); `options.rs` the tunables.

mod connect;
pub(crate) mod handshake;
mod linger;
mod link;
mod options;
mod raw;
mod reader;
mod shared;
mod stdin;
mod stream;
mod transport;
mod typist;
mod watchdog;
mod write;
mod writer;

pub(crate) use handshake::hold_handshake_lock;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{Semaphore, broadcast, mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::subscribe::Routes;
use super::{Notification, PaneId, Reply};
use crate::tmux::client_protocol::End;
use crate::tmux::command::TmuxCommand;
use crate::tmux::exit_handshake::ExitWatch;
use crate::tmux::{KillRequest, ServerHandle};
use crate::{Error, Result};
use connect::{Launch, Started, connect, refused_once};

pub use super::subscribe::{Delivery, PaneEvent, Snapshot, SubscribeOptions};
pub use options::{ClientOptions, OutputPath};
pub(crate) use shared::ClientShared;
use shared::{Internal, Overdue, Pending, State, wait_closed};
pub use stream::PaneStream;
pub use write::Queued;

/// A handle on a live control connection. Cheap to clone; the connection
/// detaches when the last handle is dropped.
#[derive(Clone)]
pub struct ControlClient {
    shared: Arc<ClientShared>,
    _guard: Arc<DropGuard>,
}

struct DropGuard(CancellationToken);

impl Drop for DropGuard {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

impl ControlClient {
    /// Spawns `command` (a `tmux -C ...` invocation that attaches) and waits
    /// until tmux has answered its first block.
    ///
    /// The command's stdio is replaced by pipes. With `opts.pause_after` set,
    /// `refresh-client -f pause-after=N` is sent before returning.
    ///
    /// # Errors
    /// `IO` when the process cannot be spawned, `COMMAND_FAILED` when the
    /// attach command fails (tmux's text in the message), `SERVER_GONE` when
    /// tmux exits first, `UNRESPONSIVE` past `opts.ready_timeout`.
    pub async fn spawn(
        command: tokio::process::Command,
        opts: ClientOptions,
    ) -> Result<ControlClient> {
        Ok(Self::spawn_subscribed(command, opts, &[]).await?.0)
    }

    /// Attaches a control client to the engine server `server` with
    /// `panes` subscribed, taking the server's handshake lock whatever
    /// `opts` says: every engine client of a server must (see
    /// [`ClientOptions::handshake_lock`]).
    ///
    /// The client links to the server's socket itself, with no `tmux -C`
    /// process ([`ServerHandle::links_directly`]); a server that refuses
    /// the link (another protocol version) gets a `tmux -C` process
    /// ([`ServerHandle::control_command`]) instead, and that is logged
    /// once. Both attach the same way: `attach-session -t =NAME`, and a
    /// server gone is never restarted (`-N`).
    ///
    /// # Errors
    /// As [`ControlClient::spawn`]; no server on the socket is
    /// `COMMAND_FAILED` with tmux's words for it (`no server running on
    /// ...`).
    pub async fn attach(
        server: &ServerHandle,
        opts: ClientOptions,
        panes: &[(PaneId, SubscribeOptions)],
    ) -> Result<(ControlClient, Vec<PaneStream>)> {
        Self::attach_with(server, opts, panes, &[], false).await
    }

    /// [`attach`](Self::attach), with no `%output` from the start: the
    /// server's one pane's bytes come from its relay (see
    /// [`Self::attach_raw`]). The client's `no-output` flag
    /// ([`crate::tmux::relay::QUIET_OUTPUT`]), set in the attach's own command list, before
    /// tmux reads the pane again.
    ///
    /// # Errors
    /// As [`ControlClient::attach`].
    pub(crate) async fn attach_quiet(
        server: &ServerHandle,
        opts: ClientOptions,
        panes: &[(PaneId, SubscribeOptions)],
    ) -> Result<(ControlClient, Vec<PaneStream>)> {
        let mut extra = vec![std::ffi::OsString::from(";")];
        extra.extend(crate::tmux::relay::QUIET_OUTPUT.map(std::ffi::OsString::from));
        Self::attach_with(server, opts, panes, &extra, true).await
    }

    /// [`attach`](Self::attach) with `extra` after the attach command;
    /// `relinkable`: a client that may let go of its connection while idle
    /// and link again the same way (only one whose panes all come from
    /// their relays: `%output` of a new connection would start anywhere).
    async fn attach_with(
        server: &ServerHandle,
        opts: ClientOptions,
        panes: &[(PaneId, SubscribeOptions)],
        extra: &[std::ffi::OsString],
        relinkable: bool,
    ) -> Result<(ControlClient, Vec<PaneStream>)> {
        let opts = ClientOptions {
            handshake_lock: Some(server.control_lock()),
            input_dir: opts.input_dir.or_else(|| Some(server.dir().to_owned())),
            ..opts
        };
        let process = || {
            let mut command = server.control_command();
            command.args(extra);
            command
        };
        let recipe = |direct| {
            relinkable.then(|| link::Recipe {
                server: server.clone(),
                extra: extra.to_vec(),
                direct,
            })
        };
        if !ServerHandle::links_directly() {
            return started(
                Self::start(Launch::Process(process()), opts, panes, recipe(false)).await,
            );
        }
        let mut argv = server.control_argv();
        argv.extend_from_slice(extra);
        let launch = Launch::Direct(server.socket(), &argv);
        match Self::start(launch, opts.clone(), panes, recipe(true)).await {
            Err(Started::Refused(why)) => {
                refused_once(server.socket(), &why);
                started(Self::start(Launch::Process(process()), opts, panes, recipe(false)).await)
            }
            other => started(other),
        }
    }

    /// Like [`ControlClient::spawn`], with pane subscriptions in place
    /// before tmux writes anything, so no output of a pane the command
    /// creates (the first pane of a fresh server is `%0`) is missed.
    ///
    /// # Errors
    /// As [`ControlClient::spawn`].
    pub async fn spawn_subscribed(
        command: tokio::process::Command,
        opts: ClientOptions,
        panes: &[(PaneId, SubscribeOptions)],
    ) -> Result<(ControlClient, Vec<PaneStream>)> {
        started(Self::start(Launch::Process(command), opts, panes, None).await)
    }

    /// Starts a client over `launch` and waits for tmux's first block;
    /// `relink` says how to link again once it let go of an idle
    /// connection (see `unlink_when_idle`).
    async fn start(
        launch: Launch<'_>,
        opts: ClientOptions,
        panes: &[(PaneId, SubscribeOptions)],
        relink: Option<link::Recipe>,
    ) -> std::result::Result<(ControlClient, Vec<PaneStream>), Started> {
        let (writer, lines) = mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        let release = CancellationToken::new();
        let shared = Arc::new(ClientShared {
            state: Mutex::new(State {
                pending: VecDeque::new(),
                stdin: stdin::Stdin::new(writer),
                routes: Routes::default(),
                raw: std::collections::HashMap::new(),
                exits: opts.exit_handshake.clone().map(ExitWatch::new),
                closed: None,
                watchdog_at: None,
                link: link::Link::Linked {
                    release: release.clone(),
                },
                last_line: tokio::time::Instant::now(),
                leaving: None,
            }),
            raw_changes: AtomicU64::new(0),
            in_flight: Arc::new(Semaphore::new(opts.max_in_flight.max(1))),
            tasks: TaskTracker::new(),
            ended: CancellationToken::new(),
            events: Mutex::new(None),
            closed: watch::channel(None).0,
            pid: std::sync::atomic::AtomicU32::new(0),
            input: tokio::sync::Mutex::new(typist::Typist::new(opts.input_dir.clone())),
            watchdog: tokio::sync::Notify::new(),
            relink,
            relink_wanted: tokio::sync::Notify::new(),
            opts,
        });

        let streams: Vec<PaneStream> = panes
            .iter()
            .map(|&(pane, sub)| PaneStream::new(&shared, pane, sub))
            .collect();
        shared.tasks.spawn(watchdog::watch_replies(shared.clone()));
        let client = ControlClient {
            shared,
            _guard: Arc::new(DropGuard(cancel.clone())),
        };
        let connected = connect(&client.shared, launch, lines, cancel, release).await;
        // Every long-lived task is started; lag watchers are started by the
        // reader, which is tracked until they are, so `wait` cannot resolve
        // between them.
        client.shared.tasks.close();
        let configured = match (connected.attached, client.shared.opts.pause_after) {
            (Ok(()), Some(secs)) => client
                .command(
                    &TmuxCommand::new("refresh-client").opt("-f", format!("pause-after={secs}")),
                )
                .await
                .map(drop),
            (attached, _) => attached,
        };
        if let Err(error) = configured {
            // A failed client leaves nothing behind: stdin's EOF detaches a
            // client that got as far as attaching, and the error is
            // returned once `tmux -C` has exited (or the link closed).
            drop(streams);
            // Closed here too where no reader started (nothing to link
            // to), which would have closed it.
            client.shared.close(error.to_string());
            client.detach().await;
            if let Some(End::Refused(why)) = connected.refusal.as_ref().and_then(|end| end.get()) {
                return Err(Started::Refused(why.clone()));
            }
            return Err(Started::Failed(error));
        }
        Ok((client, streams))
    }

    /// Runs one command and returns its reply.
    ///
    /// # Errors
    /// `COMMAND_FAILED` when tmux answers `%error`, `SERVER_GONE` when the
    /// connection is closed, `UNRESPONSIVE` past the command timeout.
    pub async fn command(&self, command: &TmuxCommand) -> Result<Reply> {
        let reply = self.command_reply(command).await?;
        if reply.ok {
            Ok(reply)
        } else {
            Err(Error::Command {
                command: command.line().to_owned(),
                message: reply.text(),
            })
        }
    }

    /// Runs one command and returns its reply even when tmux said `%error`.
    ///
    /// # Errors
    /// `SERVER_GONE` or `UNRESPONSIVE`, as for [`ControlClient::command`].
    pub async fn command_reply(&self, command: &TmuxCommand) -> Result<Reply> {
        let timeout = self.shared.opts.command_timeout;
        let line = command.checked()?.line();
        let unresponsive = |timeout| Error::Unresponsive {
            command: line.to_owned(),
            timeout,
        };
        // The reply's deadline is kept by the client's watchdog, not by a
        // timer of this call's own (see `watchdog.rs`); only a wait for an
        // in-flight slot, the slow path, arms one.
        let deadline = tokio::time::Instant::now() + timeout;
        let permit = match self.shared.in_flight.clone().try_acquire_owned() {
            Ok(permit) => Some(permit),
            Err(tokio::sync::TryAcquireError::Closed) => None,
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                let slot = self.shared.in_flight.clone().acquire_owned();
                match tokio::time::timeout_at(deadline, slot).await {
                    Ok(permit) => permit.ok(),
                    Err(_) => return Err(unresponsive(timeout)),
                }
            }
        };
        let answer = {
            let mut state = self.shared.lock();
            if state.closed.is_some() {
                drop(state);
                return Err(self.gone_error());
            }
            self.shared
                .call_locked(&mut state, line, deadline, permit, false)
        };
        match answer.await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(Overdue(waited))) => Err(unresponsive(waited)),
            Err(_) => Err(self.gone_error()),
        }
    }

    /// Subscribes to one pane's output. See [`SubscribeOptions`] for lag
    /// handling; the stream ends when the connection closes.
    pub fn subscribe_pane(&self, pane: PaneId, opts: SubscribeOptions) -> PaneStream {
        PaneStream::new(&self.shared, pane, opts)
    }

    /// Takes `pane`'s output from its relay from now on (`linked`, see
    /// [`crate::tmux::relay`]): the pane's bytes exactly, as tmux's
    /// `pipe-pane` writes them, numbered by the relay. The caller has
    /// turned `%output` off for the pane in the same tmux command list that
    /// started this client (or the pipe), so each byte comes one way only.
    /// Subscribers see no difference; [`output_path`](Self::output_path)
    /// tells.
    ///
    /// # Errors
    /// `SERVER_GONE` once the connection is closed.
    pub(crate) fn attach_raw(
        &self,
        pane: PaneId,
        linked: crate::tmux::relay::Linked,
    ) -> Result<()> {
        let mut state = self.shared.lock();
        if state.closed.is_some() {
            drop(state);
            return Err(self.gone_error());
        }
        let link = raw::start(&self.shared, self._guard.0.clone(), pane, linked);
        state.raw.insert(pane, link);
        self.shared.raw_changes.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// A count that changes whenever what [`output_path`](Self::output_path)
    /// answers for any pane may have changed: while it stays the same, so
    /// does every answer. Read before the answer it vouches for.
    pub fn output_path_changes(&self) -> u64 {
        self.shared.raw_changes.load(Ordering::Acquire)
    }

    /// Which way `pane`'s output reaches this client.
    pub fn output_path(&self, pane: PaneId) -> OutputPath {
        if self.shared.lock().raw.contains_key(&pane) {
            OutputPath::Raw
        } else {
            OutputPath::Control
        }
    }

    /// Routes to `pane`'s subscribers every byte tmux has written to the
    /// pane's raw pipe so far; returns at once for a pane on `%output`,
    /// whose bytes are routed in order with the replies already. Called by
    /// whoever learned through control mode that the pane died, before
    /// reporting it: tmux calls a piped pane dead only once the pipe has
    /// all of its output, so after this nothing of it is missing.
    pub async fn drain_raw(&self, pane: PaneId) {
        let asks = self.shared.lock().raw.get(&pane).map(|l| l.asks.clone());
        let Some(asks) = asks else { return };
        let (ack, done) = oneshot::channel();
        if asks.send(shared::RawAsk::Flush(ack)).await.is_ok() {
            // Dropped unanswered only when the reader stopped: nothing to wait for.
            let _ = done.await;
        }
    }

    /// Asks `pane`'s relay to watch the pane's process `pid` and tell this
    /// process its end over the link it already holds, so no pidfd of this
    /// process's own follows the program (see `tmux::relay`'s ends). The
    /// receiver resolves `Ok` once `pid` ended, and fails when the link
    /// ended first (the pane's pipe closed, the relay was killed: ask tmux
    /// then). `None`: no relay link, or a relay that does not watch (one
    /// that predates it, or has no pidfd to spare): watch it yourself.
    pub(crate) async fn watch_raw_exit(
        &self,
        pane: PaneId,
        pid: u32,
    ) -> Option<oneshot::Receiver<()>> {
        let asks = self.shared.lock().raw.get(&pane).map(|l| l.asks.clone())?;
        let (answer, answered) = oneshot::channel();
        asks.send(shared::RawAsk::Watch { pid, answer })
            .await
            .ok()?;
        answered.await.ok().flatten()
    }

    /// Every notification (output included) as a broadcast: a receiver that
    /// falls behind skips ahead with `RecvError::Lagged`, and every receiver
    /// ends with `RecvError::Closed` once the connection has closed.
    pub fn subscribe_events(&self) -> broadcast::Receiver<Notification> {
        let mut events = self.shared.events.lock().unwrap_or_else(|e| e.into_inner());
        // The reader marks the state closed before it takes the sender,
        // so a sender made here while it is open is taken by that close.
        {
            let mut state = self.shared.lock();
            if state.closed.is_some() {
                // Closed already: a receiver that reports `Closed` at once.
                return broadcast::channel(1).1;
            }
            // Notifications come over a connection: one let go while idle
            // comes back.
            self.shared.want_link_locked(&mut state);
        }
        let capacity = self.shared.opts.event_capacity.max(1);
        events
            .get_or_insert_with(|| broadcast::channel(capacity).0)
            .subscribe()
    }

    /// The close reason, once the connection is closed.
    pub fn closed_reason(&self) -> Option<String> {
        self.shared.closed.borrow().clone()
    }

    /// Resolves with the reason once the connection has closed and every
    /// task of this client has finished: `tmux -C` has exited (and was
    /// reaped) and the handshake lock, if it was taken to leave, is
    /// released. Nothing of the client runs after this resolves.
    pub async fn closed(&self) -> String {
        let reason = wait_closed(&self.shared).await;
        self.shared.tasks.wait().await;
        reason
    }

    /// Shuts this client down as a value: detaches (under the handshake
    /// lock, closing tmux's stdin, which ends the client but not the server)
    /// and resolves as [`closed`](ControlClient::closed) does, with the
    /// reason. Other handles of the client see it closed.
    ///
    /// A client that is merely dropped detaches the same way, in the
    /// background; a program about to exit awaits this instead, so that
    /// its runtime's end cannot cut the detach off (see
    /// [`ClientOptions::handshake_lock`]).
    pub async fn detach(&self) -> String {
        self._guard.0.cancel();
        self.closed().await
    }

    /// The request the one kill path ([`ServerHandle::kill_with`]) sends
    /// over this connection: `kill-server`, no new tmux process. `None`
    /// once the connection is closed (the kill path then runs a one-shot
    /// `kill-server` itself). The reply is not needed: the server's exit is
    /// what the kill path waits for, and it may close the connection first.
    pub fn kill_request(&self) -> Option<KillRequest<'static>> {
        if self.closed_reason().is_some() {
            return None;
        }
        let client = self.clone();
        Some(Box::pin(async move {
            let _ = client.command_reply(&TmuxCommand::new("kill-server")).await;
        }))
    }

    /// Lets go of the connection to tmux whenever it has been quiet for
    /// `linger` and nothing needs it, and links again on the next command
    /// or write, unseen by callers (see `linger.rs`): an idle terminal
    /// then holds no connection (two descriptors here, 64 KiB in its
    /// server). Only a client from [`attach_quiet`](Self::attach_quiet)
    /// (its pane's bytes come from its relay) can; false for any other,
    /// which keeps its connection. Call it once. Public for the tests (the
    /// client `terminal::launch` leaves on the raw path is one); the
    /// backend's terminals do it by their config's `idle_unlink`.
    #[doc(hidden)]
    pub fn unlink_when_idle(&self, linger: std::time::Duration) -> bool {
        if self.shared.relink.is_none() || self.closed_reason().is_some() {
            return false;
        }
        let task = linger::linger(self.shared.clone(), self._guard.0.clone(), linger);
        self.shared.tasks.spawn(task);
        true
    }

    /// Whether the connection to tmux is up (or coming back): false while
    /// let go when idle (`unlink_when_idle`) or
    /// closed; for the tests that an idle client holds none.
    #[doc(hidden)]
    pub fn linked(&self) -> bool {
        let state = self.shared.lock();
        state.closed.is_none() && !matches!(state.link, link::Link::Unlinked { .. })
    }

    /// The pid of the `tmux -C` client process; `None` for a client linked
    /// to the server's socket itself (no process: [`attach`](Self::attach)).
    pub fn pid(&self) -> Option<u32> {
        Some(self.shared.pid.load(std::sync::atomic::Ordering::Relaxed)).filter(|&pid| pid != 0)
    }

    /// Whether the reply watchdog has a timer armed: only while a command
    /// is pending (see `watchdog.rs`); for the test that an idle client
    /// keeps none.
    #[doc(hidden)]
    pub fn reply_timer_armed(&self) -> bool {
        self.shared.watching()
    }

    fn gone_error(&self) -> Error {
        gone_error(&self.shared)
    }
}

/// A start's result as its caller gets it.
fn started(
    result: std::result::Result<(ControlClient, Vec<PaneStream>), Started>,
) -> Result<(ControlClient, Vec<PaneStream>)> {
    match result {
        Ok(started) => Ok(started),
        Err(Started::Failed(error)) => Err(error),
        // A direct link refused where no fallback was tried.
        Err(Started::Refused(why)) => Err(Error::ServerGone { reason: why }),
    }
}

/// `SERVER_GONE` with the client's close reason.
fn gone_error(shared: &ClientShared) -> Error {
    Error::ServerGone {
        reason: shared
            .closed
            .borrow()
            .clone()
            .unwrap_or_else(|| "the control connection closed".to_owned()),
    }
}

impl std::fmt::Debug for ControlClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlClient")
            .field("pid", &self.pid())
            .field("closed", &self.closed_reason())
            .finish()
    }
}
