//! One tmux terminal of the registry: [`TmuxTerminal`], its shared state
//! ([`ServerLink`]), and the verbs on it (the registry's
//! [`BackendTerminal`]).
//!
//! The pane's one subscription appends its output to the terminal's
//! [`Stream`] (what sends, cursor reads and viewers read; its byte count
//! tells waiters "quiet") where the control client routes it, as a sink
//! (no task between the raw read and the stream). The watcher task
//! (`watcher.rs`) holds that subscription and detects death without
//! polling: the pane's exit through a pidfd on the pane's process (the
//! relay's where it watches, told over its link), the server's through
//! the control client's EOF. Either is pushed through the status watch at
//! once. A client that let go of its connection while idle
//! ([`TmuxConfig::idle_unlink`]) has no EOF to give: the pidfd still fires
//! when the server's death ends the pane, and the relay's link ends with
//! the pane's pipe (the watcher's `relink`); both then ask tmux, which
//! links again and finds the server gone.
//!
//! Dropping a [`TmuxTerminal`] stops the watcher and detaches the control
//! client in the background; [`BackendTerminal::shutdown`] does the same
//! and resolves when both are done. Either way the tmux server keeps
//! running (terminals outlive the engine).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::TmuxConfig;
use super::lifetime::{close, probe, respawn, shutdown};
use super::link::{ListingStamp, Mutable, ServerLink};
use super::locator::TmuxLocator;
use crate::control::Notification;
use crate::control::PaneId;
use crate::control::client::{ControlClient, PaneStream, hold_handshake_lock};
use crate::control::snapshot::capture_snapshot;
use crate::control::subscribe::Snapshot;
use crate::control::subscribe::SubscribeOptions;
use crate::registry::seam::{
    AttachLock, BackendTerminal, CloseReason, Liveness, OutputStream, ReadPage, ReadRequest,
    Screen, SendHandle, SendRequest, TerminalStatus, WriteAnswer,
};
use crate::registry::{Signal, SignalDelivery, SpawnSpec, TerminalId};
use crate::stream::Stream;
use crate::tmux::command::resize_window;
use crate::tmux::procfs;
use crate::tmux::{ProcessId, ServerHandle};
use crate::vocab::Size;
use crate::{Error, Result};

/// How long a person's attach waits for the handshake lock; holders keep it
/// for milliseconds.
const ATTACH_LOCK_PATIENCE: Duration = Duration::from_secs(5);

/// A registry terminal backed by a private tmux server.
pub struct TmuxTerminal {
    pub(super) shared: Arc<ServerLink>,
}

impl Drop for TmuxTerminal {
    fn drop(&mut self) {
        // Only local resources: the watcher ends, the client detaches when
        // its last handle goes. The server keeps running.
        self.shared.stop.cancel();
    }
}

impl std::fmt::Debug for TmuxTerminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TmuxTerminal")
            .field("id", &self.shared.id)
            .finish_non_exhaustive()
    }
}

/// What a new [`TmuxTerminal`] is made of.
pub(super) struct Parts {
    pub id: TerminalId,
    pub spec: SpawnSpec,
    pub config: Arc<TmuxConfig>,
    pub client: ControlClient,
    pub pane: PaneId,
    pub server: ServerHandle,
    pub pane_process: Option<ProcessId>,
    pub status: TerminalStatus,
    pub stream: PaneStream,
    /// The server ran before this link (adopted), so the stream starts
    /// after its program did.
    pub joined: bool,
    /// The relay's stream this process reads (raw path): its epoch and the
    /// offset of the first byte `stream` carries. `None`: `%output`, a
    /// stream of this process's own.
    pub origin: Option<(u64, u64)>,
}

impl TmuxTerminal {
    /// Builds the terminal and starts its watcher.
    pub(super) fn start(parts: Parts) -> Arc<TmuxTerminal> {
        let (restream, restreams) = mpsc::channel(4);
        if let Some(linger) = parts.config.idle_unlink {
            // An idle terminal needs its connection only for its next
            // command: the pane's death and the server's are told by the
            // relay's link meanwhile (the program's end, its pipe's; a
            // pidfd here where the relay does not watch), and the watcher
            // asks tmux then, which links again.
            parts.client.unlink_when_idle(linger);
        }
        let shared = Arc::new(ServerLink {
            id: parts.id,
            stream: Arc::new(
                Stream::new(parts.config.output_buffer)
                    .shared(parts.origin)
                    .shell(
                        super::command::integrated_shell(&parts.spec, &parts.config),
                        parts.joined,
                    ),
            ),
            spec: parts.spec,
            config: parts.config,
            client: parts.client,
            pane: parts.pane,
            address: parts.server.clone(),
            server: tokio::sync::Mutex::new(parts.server),
            mutable: Mutex::new(Mutable {
                pane_process: parts.pane_process,
                active_send: None,
                program: None,
                keeps: false,
            }),
            status: watch::Sender::new(parts.status),
            listing: ListingStamp::default(),
            restream,
            stop: CancellationToken::new(),
            tasks: TaskTracker::new(),
            closed: AtomicBool::new(false),
        });
        let stream = parts
            .stream
            .into_sink(super::watcher::sink_into(&shared.stream));
        shared.tasks.spawn(super::watcher::watch_pane(
            Arc::clone(&shared),
            stream,
            restreams,
        ));
        shared.tasks.close();
        Arc::new(TmuxTerminal { shared })
    }

    /// Keeps `program`, found behind `pane`'s wrapper, for `pid`'s next
    /// answers, unless the pane's process changed meanwhile (a respawn).
    fn found_program(&self, pane: ProcessId, program: ProcessId) {
        let mut mutable = self.shared.lock();
        if mutable.pane_process == Some(pane) {
            mutable.program = Some((pane, program));
            // Vouched for only while the pane runs (`pid` of an ended one
            // looks each time): under the watch's read lock, so a change of
            // status waits for it, then withdraws the word.
            let status = self.shared.status.borrow();
            self.shared.listing.changed(status.is_running());
        }
    }
}

/// Asks the pane's relay to keep the history `order` names from `from`
/// (see `BackendTerminal::keep_history`).
async fn keep_history(
    shared: &ServerLink,
    order: crate::history::keeper::KeepOrder,
    from: u64,
) -> Result<Option<u64>> {
    if shared.client.output_path(shared.pane) != crate::control::client::OutputPath::Raw {
        return Ok(None);
    }
    let dir = shared.address.dir().to_owned();
    let written = tokio::task::spawn_blocking({
        let dir = dir.clone();
        move || order.write(&dir)
    })
    .await
    .map_err(|error| Error::io("writing the keep order", std::io::Error::other(error)))?;
    written.map_err(|error| {
        Error::io(
            format!("writing the keep order in {}", dir.display()),
            error,
        )
    })?;
    let epoch = shared.stream.epoch();
    let kept = crate::tmux::relay::keep(&dir, epoch, from, shared.config.probe_timeout).await?;
    if kept.is_some() {
        shared.lock().keeps = true;
    }
    Ok(kept)
}

impl BackendTerminal for TmuxTerminal {
    fn pid(&self) -> Option<u32> {
        // The program's, not the exit handshake's wrapper's: a signal sent
        // to it must reach the program.
        let (pane, program) = {
            let mutable = self.shared.lock();
            (mutable.pane_process?, mutable.program)
        };
        // The wrapper's child stays its program until it ends, so the one
        // found before holds while the pane runs: no system call per look,
        // which `list` would pay per terminal (a read of /proc, then a
        // `getpriority`, cost most of a list at 1,000 terminals). Between
        // the program's end and the pane's (the exit handshake's few
        // milliseconds) its ended pid is named, as a look just before the
        // end would have; a new pane process (a respawn) or an ended pane
        // looks again.
        if let Some((for_pane, program)) = program
            && for_pane == pane
            && self.shared.status.borrow().is_running()
        {
            if self.shared.listing.get().is_none() {
                // Found before a change of status that did not change the
                // process: the answer holds again.
                self.found_program(pane, program);
            }
            return Some(program.pid);
        }
        let found = crate::tmux::exit_handshake::program_pid(pane.pid);
        if let Some(pid) = found.filter(|&pid| pid != pane.pid)
            && let Some(program) = ProcessId::now(pid).known()
        {
            self.found_program(pane, program);
        }
        found.or(Some(pane.pid))
    }

    fn listing_stamp(&self) -> Option<u64> {
        // Read before the answers they vouch for (the registry then reads
        // them): a change in between shows in the next stamp. The sum of
        // two counts that only grow changes whenever either does.
        let own = self.shared.listing.get()?;
        Some(own.wrapping_add(self.shared.client.output_path_changes()))
    }

    fn output_path(&self) -> Option<&'static str> {
        Some(self.shared.client.output_path(self.shared.pane).as_str())
    }

    fn locator(&self) -> serde_json::Value {
        // The unlocked copy of the handle: a `close` in flight holds the
        // other, and the record must still name the directory.
        let server = &self.shared.address;
        // Each pid with its start time: whoever reads the record checks it
        // before acting on the pid (see `tmux::ProcessId`).
        TmuxLocator {
            dir: Some(server.dir().to_owned()),
            socket: server.socket().to_owned(),
            session: super::SESSION.to_owned(),
            pane: self.shared.pane.to_string(),
            server: server.process().known(),
            pane_process: self.shared.lock().pane_process,
        }
        .to_value()
    }

    fn status(&self) -> TerminalStatus {
        self.shared.status.borrow().clone()
    }

    fn watch_status(&self) -> watch::Receiver<TerminalStatus> {
        self.shared.status.subscribe()
    }

    fn start_send(&self, request: SendRequest) -> Result<SendHandle> {
        super::send::start(&self.shared, request)
    }

    fn read(&self, request: ReadRequest) -> BoxFuture<'_, Result<ReadPage>> {
        Box::pin(super::pages::read(&self.shared, request))
    }

    fn stream(&self) -> Option<Arc<Stream>> {
        Some(Arc::clone(&self.shared.stream))
    }

    fn keep_history(
        &self,
        order: crate::history::keeper::KeepOrder,
        from: u64,
    ) -> BoxFuture<'_, Result<Option<u64>>> {
        Box::pin(keep_history(&self.shared, order, from))
    }

    fn catch_up(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.shared.catch_up())
    }

    fn working_directory(&self) -> Option<std::path::PathBuf> {
        super::full_screen::working_directory(&self.shared)
    }

    fn shell(&self) -> Option<std::path::PathBuf> {
        let spec = &self.shared.spec;
        let interactive = spec.command.is_empty() && spec.shell.is_none();
        interactive
            .then(|| super::config::terminal_shell(&self.shared.config, spec).ok())
            .flatten()
    }

    fn screen(&self) -> BoxFuture<'_, Result<Screen>> {
        Box::pin(super::pages::screen(&self.shared))
    }

    fn signal(&self, signal: Signal) -> BoxFuture<'_, Result<SignalDelivery>> {
        Box::pin(async move {
            let status = self.status();
            if !status.is_running() {
                return Err(Error::TerminalDead {
                    terminal: self.shared.id.to_string(),
                    status: status.to_string(),
                });
            }
            // Only a pane process known by its start time: a bare pid may
            // have been taken by a stranger since it was learnt.
            let pane = self.shared.lock().pane_process;
            let group =
                pane.and_then(procfs::foreground_group)
                    .ok_or_else(|| Error::TerminalDead {
                        terminal: self.shared.id.to_string(),
                        status: match pane {
                            Some(pane) => format!("pane process {pane} is gone"),
                            None => "pane process is gone".to_owned(),
                        },
                    })?;
            let pgid = rustix::process::Pid::from_raw(group).ok_or_else(|| {
                Error::InvalidInput(format!("process group {group} is not signalable"))
            })?;
            rustix::process::kill_process_group(pgid, signal.to_rustix()).map_err(|errno| {
                Error::io(
                    format!("sending {signal} to process group {group}"),
                    errno.into(),
                )
            })?;
            Ok(SignalDelivery {
                signal,
                pgid: group,
            })
        })
    }

    fn output(&self) -> Result<OutputStream> {
        if let Some(reason) = self.shared.client.closed_reason() {
            return Err(Error::ServerGone { reason });
        }
        let stream = self
            .shared
            .client
            .subscribe_pane(self.shared.pane, SubscribeOptions::default());
        Ok(Box::pin(futures_util::stream::unfold(
            stream,
            |mut stream| async move { stream.recv().await.map(|event| (event, stream)) },
        )))
    }

    fn write(&self, bytes: Bytes) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            self.shared
                .client
                .send_bytes(self.shared.pane, &bytes)
                .await
        })
    }

    fn write_queued(&self, bytes: Bytes) -> BoxFuture<'_, Result<WriteAnswer>> {
        Box::pin(async move {
            let queued = self
                .shared
                .client
                .send_bytes_queued(self.shared.pane, &bytes)
                .await?;
            Ok(Box::pin(queued.answered()) as WriteAnswer)
        })
    }

    fn resize(&self, size: Size) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            size.check()?;
            self.shared
                .command(&resize_window(self.shared.pane, size))
                .await
                .map(drop)
        })
    }

    fn events(&self) -> Result<broadcast::Receiver<Notification>> {
        if let Some(reason) = self.shared.client.closed_reason() {
            return Err(Error::ServerGone { reason });
        }
        Ok(self.shared.client.subscribe_events())
    }

    fn attach_command(&self, read_only: bool) -> Result<std::process::Command> {
        let server = &self.shared.address;
        // `-N`: an attach to a server that died must fail, not start an
        // empty one on its socket (see `ServerHandle::control_command`).
        let mut args: Vec<std::ffi::OsString> = vec![
            "-N".into(),
            "-S".into(),
            server.socket().as_os_str().to_owned(),
            "attach-session".into(),
            "-t".into(),
            server.session().into(),
        ];
        if read_only {
            args.push("-r".into());
        }
        Ok(server.tmux().command(args))
    }

    fn snapshot(&self, history: usize) -> BoxFuture<'_, Result<Snapshot>> {
        Box::pin(capture_snapshot(
            &self.shared.client,
            self.shared.pane,
            history,
        ))
    }

    fn attach_lock(&self) -> BoxFuture<'_, AttachLock> {
        Box::pin(async {
            let path = self.shared.address.control_lock();
            // `None` has been logged at warn: going on unlocked beats never
            // attaching when a holder hangs.
            match hold_handshake_lock(&path, ATTACH_LOCK_PATIENCE).await {
                Some(lock) => AttachLock::holding(lock),
                None => AttachLock::none(),
            }
        })
    }

    fn close(&self, reason: CloseReason) -> BoxFuture<'_, Result<()>> {
        Box::pin(close(&self.shared, reason))
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        Box::pin(shutdown(&self.shared))
    }

    fn probe(&self) -> BoxFuture<'_, Result<Liveness>> {
        Box::pin(probe(&self.shared))
    }

    fn respawn(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(respawn(&self.shared))
    }
}
