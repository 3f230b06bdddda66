//! The one kill path: a tmux server, its panes' process trees and its
//! directory, gone.
//!
//! Every way the engine ends a server comes here: [`Server::kill`] and its
//! `Drop`, the registry's close and reapers, the fixture's crash reaper.
//! The sequence, in order:
//!
//! 1. learn what the caller does not know from the server itself, in one
//!    client (`list-panes -a -F '#{pid} #{pane_pid}'`): its pid, and its
//!    panes when no pane was given;
//! 2. SIGKILL every process of each pane's session
//!    ([`process::kill_session`]): the server's exit only hangs them up
//!    (SIGHUP), which a program may ignore. Done while the server still
//!    lives, so a pane pid some other session leader took is spared;
//! 3. ask the server to exit: the caller's [`KillRequest`] (`kill-server`
//!    over its control client) or, when it is alive, a one-shot
//!    `tmux kill-server`;
//! 4. wait for the server (pidfd) and the pane processes together; SIGKILL
//!    the server after [`KILL_GRACE`] only while it is still the same
//!    process (start time) and looks like tmux;
//! 5. with the server's pid still unknown (a start cancelled mid-fork),
//!    SIGKILL whatever names its socket;
//! 6. remove the directory.
//!
//! Idempotent: a second run finds no socket, no live server, no session
//! members, no directory, and succeeds at once.
//!
//! [`ServerHandle::kill_with`] runs it awaiting; [`ServerHandle::kill_blocking`]
//! runs the very same sequence (one `async fn`) for `Drop`, through steps
//! that block the thread instead of pending.
//!
//! Must not: import `control/`. A live control client's `kill-server` comes
//! in as a [`KillRequest`] the caller builds.
//!
//! [`Server::kill`]: super::Server::kill

use std::future::Future;
use std::path::Path;
use std::pin::pin;
use std::process::Stdio;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures_util::future::{BoxFuture, Either, join, join_all, select};
use rustix::process::Signal;

use super::command::TmuxCommand;
use super::handle::ServerHandle;
use super::process;
use super::procfs::{self, ProcessId};
use crate::{Error, Result};

/// How long a server gets to exit after `kill-server` before SIGKILL, and
/// again after it; how long a pane's processes get to die after theirs.
pub const KILL_GRACE: Duration = Duration::from_secs(3);

/// How long one tmux client of the kill path may take: a hung server must
/// not hold the kill up for a whole `RUN_TIMEOUT`, it gets SIGKILL instead.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);

/// How often the blocking steps look at a child again, and the sweep of an
/// unstarted server at `/proc`.
const POLL: Duration = Duration::from_millis(2);

/// The pause before another try at a server directory that gained an
/// entry while it was removed.
const REMOVE_RETRY: Duration = Duration::from_millis(10);

/// A way to ask the server to exit other than a one-shot `tmux
/// kill-server`: typically `kill-server` written to the caller's live
/// control client, which costs no new tmux process (`tmux/` cannot reach
/// `control/`, so the caller builds it).
///
/// It need not resolve, nor wait for the reply: the kill path drops it once
/// the server has exited, since tmux may close the connection before it
/// answers. Errors are the caller's to ignore; the server's exit is what
/// counts.
pub type KillRequest<'a> = BoxFuture<'a, ()>;

impl ServerHandle {
    /// Kills the server, the process trees of its panes, and removes its
    /// directory: the one kill path (each pane's session SIGKILLed, the
    /// server asked to exit and awaited, SIGKILLed after a grace, then the
    /// directory removed). Resolves when the server and the pane processes are dead
    /// and the directory is gone. Idempotent.
    ///
    /// - `pane`: the pane's program (a session leader), best with its start
    ///   time ([`ProcessId::now`] when its pid was learnt) so a recycled pid
    ///   is never taken for it; `None` (or pid 0) asks the server for all
    ///   its panes.
    /// - `request`: how to ask the server to exit, e.g. over a live control
    ///   client; `None` runs `tmux kill-server`.
    ///
    /// # Errors
    ///
    /// [`Error::Unresponsive`] when the server survives SIGKILL (the
    /// directory is then kept: its socket is still in use) or a pane
    /// process does; [`Error::Io`] when a signal or the directory removal
    /// fails.
    pub async fn kill_with(
        &mut self,
        pane: Option<ProcessId>,
        request: Option<KillRequest<'_>>,
    ) -> Result<()> {
        sequence(&Awaiting, self, pane, request).await
    }

    /// [`kill_with`](Self::kill_with) with every pane's tree and a one-shot
    /// `tmux kill-server`: for a server found on disk.
    ///
    /// # Errors
    ///
    /// As [`kill_with`](Self::kill_with).
    pub async fn kill(&mut self) -> Result<()> {
        self.kill_with(None, None).await
    }

    /// [`kill_with`](Self::kill_with) blocking the thread, without a
    /// runtime, and with no request (a control client needs one): for
    /// `Drop` only. The same sequence; each tmux client gets 2 s, each wait
    /// 3 s.
    ///
    /// # Errors
    ///
    /// As [`kill_with`](Self::kill_with).
    pub fn kill_blocking(&mut self, pane: Option<ProcessId>) -> Result<()> {
        drive(sequence(&Blocking, self, pane, None))
    }
}

/// The kill path; see the [module docs](self).
async fn sequence<S: Steps>(
    steps: &S,
    server: &mut ServerHandle,
    pane: Option<ProcessId>,
    request: Option<KillRequest<'_>>,
) -> Result<()> {
    let socket = server.socket().exists();
    let pane = pane.filter(|pane| pane.pid != 0);
    let mut panes: Vec<ProcessId> = pane.into_iter().collect();
    if socket && (server.pid() == 0 || (pane.is_none() && process::is_alive(server.process()))) {
        let list = TmuxCommand::new("list-panes")
            .flag("-a")
            .opt("-F", "#{pid} #{pane_pid}");
        let listed = steps.tmux(server, &list).await.unwrap_or_default();
        for line in listed.lines() {
            let mut fields = line.split(' ').map(str::parse::<u32>);
            if let (Some(Ok(pid)), Some(Ok(pane_pid))) = (fields.next(), fields.next()) {
                if server.pid() == 0 {
                    server.set_pid(pid);
                }
                if pane.is_none() {
                    panes.push(ProcessId::now(pane_pid));
                }
            }
        }
    }
    let server = &*server;
    let process = server.process();
    let members: Vec<ProcessId> = panes
        .iter()
        .flat_map(|&pane| process::kill_session(pane, process))
        .collect();

    let server_dead = server_dead(steps, process);
    let trees_dead = join_all(members.iter().map(|&member| async move {
        (!steps.wait_dead(member, KILL_GRACE).await).then_some(member)
    }));
    let waits = join(server_dead, trees_dead);
    let (stopped, survivors) = match request {
        Some(request) => match select(request, pin!(waits)).await {
            Either::Left(((), waits)) => waits.await,
            Either::Right((done, _request)) => done,
        },
        None => {
            // Only a live server is asked: one known dead needs no client
            // that could only fail (tmux 3.3a leaves its socket behind), and
            // one that did not answer `list-panes` (pid still unknown) will
            // not answer this either; the sweep below is for that.
            if process::is_alive(process) {
                let _ = steps.tmux(server, &TmuxCommand::new("kill-server")).await;
            }
            waits.await
        }
    };
    if process.pid == 0 {
        sweep(steps, server.socket()).await;
    }
    stopped?;
    remove_dir(steps, server.dir()).await?;
    if let Some(member) = survivors.into_iter().flatten().next() {
        return Err(Error::Unresponsive {
            command: format!("SIGKILL of pane process {member}"),
            timeout: KILL_GRACE,
        });
    }
    Ok(())
}

/// Waits for the server's exit, with SIGKILL after [`KILL_GRACE`]; an
/// unknown server (pid 0) is the sweep's.
async fn server_dead<S: Steps>(steps: &S, server: ProcessId) -> Result<()> {
    if server.pid == 0 || steps.wait_dead(server, KILL_GRACE).await {
        return Ok(());
    }
    tracing::warn!(
        pid = server.pid,
        "tmux server ignored kill-server; sending SIGKILL"
    );
    if process::looks_like_tmux(server) {
        process::signal(server, Signal::KILL)?;
    }
    if steps.wait_dead(server, KILL_GRACE).await {
        return Ok(());
    }
    Err(Error::Unresponsive {
        command: format!("kill-server (pid {server} survived SIGKILL)"),
        timeout: KILL_GRACE * 2,
    })
}

/// SIGKILLs every process naming `socket` until none is left, for at most
/// [`KILL_GRACE`]: a server whose pid is unknown because its start was
/// cancelled mid-fork shows up as the client's child, then as its own
/// daemon (see [`procfs::processes_naming`]). Its clients go too.
async fn sweep<S: Steps>(steps: &S, socket: &Path) {
    let deadline = Instant::now() + KILL_GRACE;
    loop {
        let named = procfs::processes_naming(socket.as_os_str());
        if named.is_empty() {
            return;
        }
        for &pid in &named {
            let _ = process::signal(pid, Signal::KILL);
        }
        if Instant::now() >= deadline {
            tracing::warn!(?named, "processes of a tmux server outlived SIGKILL");
            return;
        }
        steps.pause(POLL).await;
    }
}

/// Removes the server's directory; already gone is success.
///
/// Another engine process that linked to the server just before it died
/// may still be putting files there (a relay's lock and socket while it
/// finds the relay gone with the pane): a removal that finds a new entry
/// is tried again, for at most [`KILL_GRACE`]. The server is dead, so no
/// new link can begin; the error names what stayed.
async fn remove_dir<S: Steps>(steps: &S, dir: &Path) -> Result<()> {
    let deadline = Instant::now() + KILL_GRACE;
    loop {
        match std::fs::remove_dir_all(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e)
                if e.kind() == std::io::ErrorKind::DirectoryNotEmpty
                    && Instant::now() < deadline =>
            {
                tracing::debug!(dir = %dir.display(), "an entry came during the removal; again");
                steps.pause(REMOVE_RETRY).await;
            }
            Err(e) => {
                let left: Vec<String> = std::fs::read_dir(dir)
                    .map(|entries| {
                        entries
                            .filter_map(|entry| entry.ok())
                            .map(|entry| entry.file_name().to_string_lossy().into_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                return Err(Error::io(
                    format!(
                        "removing server directory {} (left: {left:?})",
                        dir.display()
                    ),
                    e,
                ));
            }
        }
    }
}

/// How [`sequence`] runs a step that takes time: the one difference
/// between the async and the blocking kill.
trait Steps {
    /// Runs `cmd` as a one-shot tmux client of `server` within
    /// [`CLIENT_TIMEOUT`]; its stdout when it succeeds.
    async fn tmux(&self, server: &ServerHandle, cmd: &TmuxCommand) -> Option<String>;
    /// Whether `process` is dead within `timeout`.
    async fn wait_dead(&self, process: ProcessId, timeout: Duration) -> bool;
    /// Lets `pause` pass.
    async fn pause(&self, pause: Duration);
}

/// Steps in a runtime: pidfd waits, tokio processes and timers.
struct Awaiting;

impl Steps for Awaiting {
    async fn tmux(&self, server: &ServerHandle, cmd: &TmuxCommand) -> Option<String> {
        server.run_within(cmd, CLIENT_TIMEOUT).await.ok()
    }

    async fn wait_dead(&self, process: ProcessId, timeout: Duration) -> bool {
        process::wait_dead(process, timeout).await
    }

    async fn pause(&self, pause: Duration) {
        tokio::time::sleep(pause).await;
    }
}

/// Steps that block the thread and never pend, so [`drive`] finishes the
/// sequence in one poll, without a runtime.
struct Blocking;

impl Steps for Blocking {
    async fn tmux(&self, server: &ServerHandle, cmd: &TmuxCommand) -> Option<String> {
        let cmd = cmd.checked().ok()?;
        let mut cli = server.cli().into_std();
        cli.args(cmd.argv())
            .stdin(Stdio::null())
            .stderr(Stdio::null());
        let mut child = match cli.spawn() {
            Ok(child) => child,
            Err(error) => {
                tracing::warn!(%error, command = cmd.line(), "spawning tmux without a runtime");
                return None;
            }
        };
        let deadline = Instant::now() + CLIENT_TIMEOUT;
        loop {
            match child.try_wait() {
                // The output is a few lines at most: it fits in the pipe,
                // so reading after the exit cannot deadlock.
                Ok(Some(status)) => {
                    let mut out = String::new();
                    let stdout = child.stdout.take()?;
                    std::io::Read::read_to_string(&mut { stdout }, &mut out).ok()?;
                    return status.success().then_some(out);
                }
                Ok(None) if Instant::now() < deadline => std::thread::sleep(POLL),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return None;
                }
            }
        }
    }

    async fn wait_dead(&self, process: ProcessId, timeout: Duration) -> bool {
        process::wait_dead_blocking(process, timeout)
    }

    async fn pause(&self, pause: Duration) {
        std::thread::sleep(pause);
    }
}

/// Runs a future built on [`Blocking`] steps to its end on this thread.
/// It completes in its first poll; should it ever pend, it is polled again
/// after a pause rather than panicking inside `Drop`.
fn drive<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::sleep(POLL);
    }
}
