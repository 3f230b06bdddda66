//! The control client: one task owns a `tmux -C` process.
//!
//! Commands are pipelined: each is written as one line and its reply is
//! matched in order against a FIFO of pending commands. Only blocks with
//! `%begin` flags `1` (commands this client wrote) consume the FIFO; tmux's
//! own blocks (the attach command, hooks) come with flags `0` and are skipped.
//!
//! Four tasks per client (three with a server directory), plus one short-lived lag watcher per subscriber
//! that falls behind, all on the client's own [`TaskTracker`]:
//! - the reader (`reader.rs`) owns the child and its stdout and never waits on anyone
//!   (except [`Delivery::Lossless`] subscribers, who asked for it): it routes
//!   output, completes replies and runs the flow control of `subscribe`;
//! - the writer writes queued lines to stdin in order, batching them (a
//!   line queued while it is idle is written by its caller: `stdin.rs`);
//! - a stderr drain keeps tmux's last words for the close reason, where
//!   the server has no directory to write them to a file in;
//! - the reply watchdog (`watchdog.rs`) tells callers whose command is
//!   unanswered past the command timeout, with one timer for the client;
//! - a lag watcher waits for room in a lagging subscriber's queue, then
//!   starts its resync.
//!
//! When tmux goes away (`%exit`, EOF, a crash) every pending command fails
//! with `SERVER_GONE`, every stream ends and [`ControlClient::closed`]
//! resolves with the reason once every task of the client has finished.
//! Shutdown is a value: [`ControlClient::detach`] resolves only when
//! `tmux -C` has exited, the handshake lock is released and no task of the
//! client is left; no program has to wait for anything global. This module
//! must not know how the server was started: it takes a ready `Command`.
//!
//! `shared.rs` holds what the handle and the tasks share (the state under
//! one lock and the locked writes); `options.rs` the tunables.

pub(crate) mod handshake;
mod options;
mod raw;
mod reader;
mod shared;
mod stdin;
mod stream;
mod typist;
mod watchdog;
mod write;
mod writer;

pub(crate) use handshake::hold_handshake_lock;

use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tokio::sync::{Semaphore, broadcast, mpsc, oneshot, watch};
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::subscribe::Routes;
use super::{ControlCodec, Notification, PaneId, Reply};
use crate::tmux::command::TmuxCommand;
use crate::tmux::exit_handshake::ExitWatch;
use crate::tmux::{KillRequest, ServerHandle};
use crate::{Error, Result};
use reader::{LastWords, Reader, drain_stderr};

pub use super::subscribe::{Delivery, PaneEvent, Snapshot, SubscribeOptions};
pub use options::{ClientOptions, OutputPath};
pub(crate) use shared::ClientShared;
use shared::{Internal, Overdue, Pending, State, wait_closed};
pub use stream::PaneStream;

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

    /// Attaches a control client to the engine server `server`
    /// ([`ServerHandle::control_command`]) with `panes` subscribed, taking
    /// the server's handshake lock whatever `opts` says: every engine client
    /// of a server must (see [`ClientOptions::handshake_lock`]).
    ///
    /// # Errors
    /// As [`ControlClient::spawn`].
    pub async fn attach(
        server: &ServerHandle,
        opts: ClientOptions,
        panes: &[(PaneId, SubscribeOptions)],
    ) -> Result<(ControlClient, Vec<PaneStream>)> {
        let opts = ClientOptions {
            handshake_lock: Some(server.control_lock()),
            input_dir: opts.input_dir.or_else(|| Some(server.dir().to_owned())),
            ..opts
        };
        Self::spawn_subscribed(server.control_command(), opts, panes).await
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
        let opts = ClientOptions {
            handshake_lock: Some(server.control_lock()),
            input_dir: opts.input_dir.or_else(|| Some(server.dir().to_owned())),
            ..opts
        };
        let mut command = server.control_command();
        command.arg(";").args(crate::tmux::relay::QUIET_OUTPUT);
        Self::spawn_subscribed(command, opts, panes).await
    }

    /// Like [`ControlClient::spawn`], with pane subscriptions in place
    /// before tmux writes anything, so no output of a pane the command
    /// creates (the first pane of a fresh server is `%0`) is missed.
    ///
    /// # Errors
    /// As [`ControlClient::spawn`].
    pub async fn spawn_subscribed(
        mut command: tokio::process::Command,
        opts: ClientOptions,
        panes: &[(PaneId, SubscribeOptions)],
    ) -> Result<(ControlClient, Vec<PaneStream>)> {
        // tmux's last words go to a file in the server's directory when
        // there is one: a pipe and its drain task per client were a
        // descriptor and a task per terminal for words written only when it
        // fails (a serve of 5,000 idle terminals met its open-file limit).
        let stderr_file = match &opts.input_dir {
            Some(dir) => tempfile::Builder::new()
                .prefix(".tmux-c-")
                .suffix(".err")
                .tempfile_in(dir)
                .ok()
                .map(tempfile::NamedTempFile::into_parts),
            None => None,
        };
        let (stderr_io, stderr_path) = match stderr_file {
            Some((file, path)) => (Stdio::from(file), Some(path)),
            None => (Stdio::piped(), None),
        };
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr_io)
            .kill_on_drop(true);
        let program = format!("{:?}", command.as_std());
        let handshake = match &opts.handshake_lock {
            Some(path) => {
                handshake::acquire(path, handshake::Create::IfMissing, opts.ready_timeout).await
            }
            None => None,
        };
        let mut child = command
            .spawn()
            .map_err(|e| Error::io(format!("spawning {program}"), e))?;
        let io_missing = || Error::io("spawning tmux -C", std::io::Error::other("stdio not piped"));
        let stdin = child.stdin.take().ok_or_else(io_missing)?;
        let stdout = child.stdout.take().ok_or_else(io_missing)?;
        let stderr = match stderr_path {
            Some(path) => Err(path),
            None => Ok(child.stderr.take().ok_or_else(io_missing)?),
        };

        let (writer, lines) = mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        // Closing stdin detaches; the reader does it once it may (after
        // taking the handshake lock), not the moment the client is dropped.
        let hangup = CancellationToken::new();
        let shared = Arc::new(ClientShared {
            state: Mutex::new(State {
                pending: VecDeque::new(),
                stdin: stdin::Stdin::new(writer),
                routes: Routes::default(),
                raw: std::collections::HashMap::new(),
                exits: opts.exit_handshake.clone().map(ExitWatch::new),
                closed: None,
                watchdog_at: None,
            }),
            in_flight: Arc::new(Semaphore::new(opts.max_in_flight.max(1))),
            tasks: TaskTracker::new(),
            ended: CancellationToken::new(),
            events: Mutex::new(None),
            closed: watch::channel(None).0,
            pid: child.id(),
            input: tokio::sync::Mutex::new(typist::Typist::new(opts.input_dir.clone())),
            watchdog: tokio::sync::Notify::new(),
            opts,
        });

        let streams: Vec<PaneStream> = panes
            .iter()
            .map(|&(pane, sub)| PaneStream::new(&shared, pane, sub))
            .collect();

        let (ready_tx, ready_rx) = oneshot::channel();
        shared.tasks.spawn(watchdog::watch_replies(shared.clone()));
        let stderr_tail = match stderr {
            Ok(pipe) => {
                let tail = Arc::new(Mutex::new(Vec::new()));
                shared
                    .tasks
                    .spawn(drain_stderr(pipe, tail.clone(), shared.ended.clone()));
                LastWords::Drained(tail)
            }
            Err(path) => LastWords::File(path),
        };
        let framed = FramedRead::with_capacity(
            stdout,
            ControlCodec::with_max_line_length(shared.opts.max_line_length),
            64 * 1024,
        );
        shared.tasks.spawn(
            Reader {
                shared: shared.clone(),
                cancel: cancel.clone(),
                ready: Some(ready_tx),
                exit_reason: None,
                stderr_tail,
            }
            .run(framed, child, hangup.clone()),
        );

        let client = ControlClient {
            shared,
            _guard: Arc::new(DropGuard(cancel.clone())),
        };
        let ready_timeout = client.shared.opts.ready_timeout;
        let ready = tokio::time::timeout(ready_timeout, ready_rx).await;
        // Attached (or failed): this client has its control state now.
        drop(handshake);
        let mut stdin = Some(stdin);
        let attached = match ready {
            Ok(Ok(Ok(()))) => {
                // tmux 3.3a and older read stdin before the attach command
                // has run, so nothing is written until its block closed.
                match stdin.take() {
                    Some(stdin) => writer::start(&client.shared, stdin, lines, hangup)
                        .map_err(|e| Error::io("writing to tmux -C", e)),
                    None => Ok(()),
                }
            }
            Ok(Ok(Err(message))) => Err(Error::Command {
                command: program,
                message,
            }),
            Ok(Err(_)) => Err(client.gone_error()),
            Err(_) => Err(Error::Unresponsive {
                command: program,
                timeout: ready_timeout,
            }),
        };
        // Every long-lived task is started; lag watchers are started by the
        // reader, which is tracked until they are, so `wait` cannot resolve
        // between them.
        client.shared.tasks.close();
        let configured = match (attached, client.shared.opts.pause_after) {
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
            // returned once `tmux -C` has exited.
            drop((stdin, streams));
            client.detach().await;
            return Err(error);
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
        let unresponsive = || Error::Unresponsive {
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
                    Err(_) => return Err(unresponsive()),
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
            Ok(Err(Overdue)) => Err(unresponsive()),
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
        Ok(())
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
        let flush = self.shared.lock().raw.get(&pane).map(|l| l.flush.clone());
        let Some(flush) = flush else { return };
        let (ack, done) = oneshot::channel();
        if flush.send(ack).await.is_ok() {
            // Dropped unanswered only when the reader stopped: nothing to wait for.
            let _ = done.await;
        }
    }

    /// Every notification (output included) as a broadcast: a receiver that
    /// falls behind skips ahead with `RecvError::Lagged`, and every receiver
    /// ends with `RecvError::Closed` once the connection has closed.
    pub fn subscribe_events(&self) -> broadcast::Receiver<Notification> {
        let mut events = self.shared.events.lock().unwrap_or_else(|e| e.into_inner());
        // The reader marks the state closed before it takes the sender,
        // so a sender made here while it is open is taken by that close.
        if self.shared.lock().closed.is_some() {
            // Closed already: a receiver that reports `Closed` at once.
            return broadcast::channel(1).1;
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

    /// The pid of the `tmux -C` client process.
    pub fn pid(&self) -> Option<u32> {
        self.shared.pid
    }

    fn gone_error(&self) -> Error {
        Error::ServerGone {
            reason: self
                .closed_reason()
                .unwrap_or_else(|| "the control connection closed".to_owned()),
        }
    }
}

impl std::fmt::Debug for ControlClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlClient")
            .field("pid", &self.shared.pid)
            .field("closed", &self.closed_reason())
            .finish()
    }
}
