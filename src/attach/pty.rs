//! The PTY-attach transport: `tmux attach` under a pseudo-terminal the
//! engine owns, its bytes streamed to one viewer.
//!
//! No `unsafe`: the pty comes from `rustix::pty` (`openpt`, `grantpt`,
//! `unlockpt`, `ptsname`), its size from `tcsetwinsize`, and the child gets
//! its own session with the pty as controlling terminal from util-linux's
//! `setsid --ctty` (`pre_exec` would need `unsafe`; `setsid` ships in every
//! Debian base system, so no crate is needed for it). The engine opens both
//! sides `O_NOCTTY`: the pty is the client's controlling terminal, never
//! serve's.
//!
//! No way out to tmux's command prompt: the client attaches to a session of
//! its own, grouped with the terminal's (same windows), whose `prefix` and
//! `prefix2` are `None` and whose `key-table` is an empty table, so every
//! key (`C-b :` included) reaches the program and no binding (mouse and copy
//! mode included) runs. A person's `tmux attach` to the terminal's own
//! session keeps its keys. The grouped session is `destroy-unattached`, so
//! it goes with the client.
//!
//! The attach and the detach each run under the server's handshake lock
//! (tmux 3.3a crashes when a notification such as `%client-detached` goes
//! out while a control client identifies).

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStringExt;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rustix::fs::{Mode, OFlags};
use rustix::pty::OpenptFlags;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};
use tokio_util::task::TaskTracker;
use tracing::debug;

use super::{AttachOptions, Hello, Transport, ViewerEvent};
use crate::registry::{AttachLock, AttachTarget, RestartPolicy, TerminalStatus, ViewedTerminal};
use crate::vocab::Size;
use crate::{Error, Result};

/// The empty key table engine-attached clients use.
const INERT_TABLE: &str = "tmux-engine-inert";
/// How long the handshake lock is waited for, and held while the client
/// attaches if it draws nothing.
const LOCK_PATIENCE: Duration = Duration::from_secs(5);
/// One read from the pty.
const READ_CHUNK: usize = 64 * 1024;

/// The viewer's side of a PTY attach: the client's output, input and
/// resizes; dropping it detaches the client.
///
/// The viewer's own task reads the pty (a task between them cost
/// each echo a hand-over, ~10 µs); the session's task only watches the
/// terminal's status and the client's life. A slow viewer reads late, so
/// only its own client waits: tmux keeps the program and every other
/// client going.
pub(crate) struct PtyLink {
    master: Arc<AsyncFd<OwnedFd>>,
    buf: Vec<u8>,
    terminal: ViewedTerminal,
    _detach: DropGuard,
}

impl PtyLink {
    /// The client's next output; `None` once it ended (the client exited).
    /// Cancel-safe: nothing is read unless it is returned.
    pub(crate) async fn read(&mut self) -> Option<Bytes> {
        read_some(&self.master, &mut self.buf).await
    }

    /// What the pty holds now, without waiting; `None` when it holds
    /// nothing or ended (the session's end: its last bytes are drained
    /// before the viewer is told).
    pub(crate) fn read_now(&mut self) -> Option<Bytes> {
        match rustix::io::read(self.master.get_ref(), &mut self.buf) {
            Ok(n) if n > 0 => Some(Bytes::copy_from_slice(&self.buf[..n])),
            _ => None,
        }
    }

    /// Writes `bytes` to the client's terminal, all of them.
    pub(crate) async fn write(&self, bytes: &[u8]) -> Result<()> {
        write_all(&self.master, bytes).await?;
        crate::hops::mark(crate::hops::Hop::Written);
        Ok(())
    }

    /// Sizes the pty (the client redraws) and the terminal (the program
    /// gets SIGWINCH: `window-size manual` keeps clients from sizing it).
    pub(crate) async fn resize(&self, size: Size) -> Result<()> {
        set_size(self.master.get_ref(), size)?;
        self.terminal.resize(size).await
    }
}

fn set_size(master: &OwnedFd, size: Size) -> Result<()> {
    let winsize = rustix::termios::Winsize {
        ws_row: size.rows,
        ws_col: size.cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    rustix::termios::tcsetwinsize(master, winsize)
        .map_err(|e| Error::io("sizing the attach pty", e.into()))
}

/// The argv of a `tmux attach` whose client cannot reach tmux commands:
/// `base` is the backend's attach command (`tmux [GLOBAL] attach-session -t
/// TARGET [-r]`), rewritten to create an inert grouped session and attach
/// to it.
fn inert_argv(base: &std::process::Command, read_only: bool, view: &str) -> Result<Vec<OsString>> {
    let args: Vec<&std::ffi::OsStr> = base.get_args().collect();
    let at = args
        .iter()
        .position(|arg| *arg == "attach-session" || *arg == "attach")
        .ok_or_else(|| Error::Unsupported("the backend's attach command has no attach".into()))?;
    let target = args[at..]
        .windows(2)
        .find(|pair| pair[0] == "-t")
        .map(|pair| pair[1].to_owned())
        .ok_or_else(|| Error::Unsupported("the backend's attach command has no target".into()))?;
    // Not `=VIEW`: tmux 3.3a resolves `=` targets in a command list before
    // `new-session` made the session ("no such session"); the name is
    // random, so a plain name cannot match another session.
    let exact = view.to_owned();
    let mut argv: Vec<OsString> = args[..at].iter().map(|a| (*a).to_owned()).collect();
    argv.extend(["new-session", "-d", "-t"].map(OsString::from));
    argv.push(target);
    argv.extend(["-s", view].map(OsString::from));
    for (option, value) in [
        ("prefix", "None"),
        ("prefix2", "None"),
        ("key-table", INERT_TABLE),
        ("destroy-unattached", "on"),
    ] {
        argv.extend([";", "set-option", "-t", &exact, option, value].map(OsString::from));
    }
    argv.extend([";", "attach-session", "-t", &exact].map(OsString::from));
    if read_only {
        argv.push("-r".into());
    }
    Ok(argv)
}

/// Opens a PTY attach for `found`'s terminal.
///
/// # Errors
/// `UNSUPPORTED` when the backend has no attach command; the pty's or the
/// spawn's failure.
pub(crate) async fn open(
    found: &AttachTarget,
    opts: &AttachOptions,
    events: mpsc::Sender<ViewerEvent>,
    cancel: &CancellationToken,
    tasks: &TaskTracker,
) -> Result<(Hello, PtyLink)> {
    let terminal = found.terminal.clone();
    let base = terminal.attach_command(opts.read_only)?;
    let view = format!("view-{:016x}", getrandom::u64().unwrap_or_default());
    let argv = inert_argv(&base, opts.read_only, &view)?;
    let size = match (opts.size, opts.read_only) {
        (Some(size), false) => {
            terminal.resize(size).await?;
            size
        }
        (Some(size), true) => size,
        (None, _) => terminal.screen().await?.size(),
    };

    let (master, pts) = pair()?;
    set_size(&master, size)?;
    // `AsyncFd::new` is deprecated because a borrowed raw fd could close
    // under it; an `OwnedFd` moved in stays open as long as the `AsyncFd`,
    // which is exactly the contract `register` makes callers promise.
    // Reads only: see `PtyLink::write`.
    #[allow(deprecated)]
    let master = Arc::new(
        AsyncFd::with_interest(master, Interest::READABLE)
            .map_err(|e| Error::io("registering the pty", e))?,
    );

    let mut command = tokio::process::Command::new("setsid");
    command.arg("--ctty").arg(base.get_program()).args(&argv);
    crate::tmux::process::copy_env(&base, &mut command);
    // The client always advertises what a viewer renders, never the
    // engine's ambient TERM (a headless host's `dumb` broke rendering).
    command
        .env("TERM", "xterm-256color")
        .env_remove("TMUX")
        .env_remove("TMUX_PANE")
        .stdin(Stdio::from(clone(&pts)?))
        .stdout(Stdio::from(clone(&pts)?))
        .stderr(Stdio::from(pts))
        .kill_on_drop(true);
    // The backend's own attach guard (for tmux, the per-server handshake
    // lock): held until the client has drawn, and again around its kill.
    let lock = terminal.attach_lock().await;
    let child = command
        .spawn()
        .map_err(|e| Error::io("spawning setsid --ctty tmux attach", e))?;
    // `command` still holds the pts copies given to the child; dropped so
    // the pty reports EOF once the client exits.
    drop(command);

    let detach = cancel.child_token();
    let session = Session {
        master: Arc::clone(&master),
        terminal: terminal.clone(),
        child,
        events,
        detach: detach.clone(),
        always: found.snapshot.restart == RestartPolicy::Always,
    };
    tasks.spawn(session.run(lock));
    let hello = Hello {
        transport: Transport::Pty,
        read_only: opts.read_only,
        size,
        cursor: None,
        id: found.snapshot.id.clone(),
        name: found.snapshot.name.clone(),
    };
    Ok((
        hello,
        PtyLink {
            master,
            buf: vec![0; READ_CHUNK],
            terminal,
            _detach: detach.drop_guard(),
        },
    ))
}

/// A new pty: its master, non-blocking, and its terminal side.
fn pair() -> Result<(OwnedFd, std::fs::File)> {
    let master =
        rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)
            .map_err(|e| Error::io("opening a pty", e.into()))?;
    rustix::pty::grantpt(&master).map_err(|e| Error::io("granting the pty", e.into()))?;
    rustix::pty::unlockpt(&master).map_err(|e| Error::io("unlocking the pty", e.into()))?;
    let name = rustix::pty::ptsname(&master, Vec::new())
        .map_err(|e| Error::io("naming the pty", e.into()))?;
    // O_NOCTTY: a serve that leads its session (systemd, a container
    // init, `setsid`) would otherwise take the pty as its own controlling
    // terminal; the client's `setsid --ctty` could then not claim it
    // (without CAP_SYS_ADMIN), and the pty's hang-up would SIGHUP serve.
    let pts = rustix::fs::open(
        std::path::PathBuf::from(OsString::from_vec(name.into_bytes())),
        OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map(std::fs::File::from)
    .map_err(|e| Error::io("opening the pty's terminal side", e.into()))?;
    rustix::io::ioctl_fionbio(&master, true)
        .map_err(|e| Error::io("making the pty non-blocking", e.into()))?;
    Ok((master, pts))
}

fn clone(file: &std::fs::File) -> Result<std::fs::File> {
    file.try_clone()
        .map_err(|e| Error::io("sharing the pty's terminal side", e))
}

/// One running `tmux attach` client and the task that watches it: the
/// terminal's exits for the viewer, the attach lock, the client's end (the
/// viewer reads the client's output itself).
struct Session {
    master: Arc<AsyncFd<OwnedFd>>,
    terminal: ViewedTerminal,
    child: tokio::process::Child,
    events: mpsc::Sender<ViewerEvent>,
    detach: CancellationToken,
    always: bool,
}

impl Session {
    async fn run(mut self, lock: AttachLock) {
        let mut lock = Some(lock);
        let attached_by = tokio::time::Instant::now() + LOCK_PATIENCE;
        let mut status = self.terminal.watch_status();
        let mut exited = !status.borrow_and_update().is_running();
        // Made once: one made each turn registered and dropped a waiter on
        // the token every turn, a cost on every keystroke's echo.
        let detached = self.detach.clone().cancelled_owned();
        tokio::pin!(detached);
        loop {
            tokio::select! {
                () = &mut detached => break,
                // Attached once it drew something (the viewer reads it):
                // the attach is over.
                ready = self.master.readable(), if lock.is_some() => {
                    drop(ready);
                    lock = None;
                }
                () = tokio::time::sleep_until(attached_by), if lock.is_some() => lock = None,
                // The client exited (its pty then ends for the viewer).
                _ = self.child.wait() => break,
                changed = status.changed() => {
                    let now = match changed {
                        Ok(()) => status.borrow_and_update().clone(),
                        Err(_) => TerminalStatus::Gone { reason: "terminal dropped".into() },
                    };
                    match now {
                        TerminalStatus::Exited { exit } if !exited => {
                            exited = true;
                            let _ = self.events.send(ViewerEvent::Exit(exit)).await;
                            if !self.always {
                                break;
                            }
                        }
                        TerminalStatus::Running => exited = false,
                        TerminalStatus::Gone { .. } => break,
                        TerminalStatus::Exited { .. } => {}
                    }
                }
            }
        }
        drop(lock);
        self.kill().await;
    }

    /// Kills the client under the handshake lock (its leaving sends
    /// `%client-detached`).
    async fn kill(&mut self) {
        let _lock = self.terminal.attach_lock().await;
        if let Err(error) = self.child.start_kill() {
            debug!(%error, "tmux attach client already gone");
        }
        let _ = self.child.wait().await;
    }
}

/// Writes all of `bytes` to the pty `master` (non-blocking, registered for
/// reads only).
///
/// Written straight away; only a pty that is full (a paste the client has
/// not read yet) is waited on, through a registration made for that wait
/// alone. The master is registered for reads only because a pty tells its
/// writer it has room again after every read of its other side: a write
/// interest woke the runtime once more for each keystroke, while tmux was
/// still handling it (5 -> 4 context switches per echo without it).
async fn write_all(master: &AsyncFd<OwnedFd>, mut bytes: &[u8]) -> Result<()> {
    while !bytes.is_empty() {
        match rustix::io::write(master.get_ref(), bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(rustix::io::Errno::AGAIN) => room(master).await?,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(Error::io("writing to the attach pty", e.into())),
        }
    }
    Ok(())
}

/// Waits until `master` takes writes again, on a copy of its descriptor
/// registered for writes until it is dropped here (epoll keys on the
/// descriptor, so the copy's interest is its own; its registration sees a
/// pty that has room already).
async fn room(master: &AsyncFd<OwnedFd>) -> Result<()> {
    let waiting = |e| Error::io("waiting to write to the attach pty", e);
    let copy =
        rustix::io::fcntl_dupfd_cloexec(master.get_ref(), 0).map_err(|e| waiting(e.into()))?;
    // Deprecated for a borrowed raw fd that could close under it; this one
    // is owned and moved in.
    #[allow(deprecated)]
    let copy = AsyncFd::with_interest(copy, Interest::WRITABLE).map_err(waiting)?;
    let _ready = copy.writable().await.map_err(waiting)?;
    Ok(())
}

/// One read from the pty; `None` at its end (the client exited: EIO).
///
/// A read that leaves room in `buf` drained the pty, so its readiness is
/// cleared then: else the next call read once more only to fail `EAGAIN`
/// before this task let the viewer's run, on every echo's way (tokio
/// does the same for its sockets). Data that comes later is a new
/// edge, so nothing is missed.
async fn read_some(master: &AsyncFd<OwnedFd>, buf: &mut [u8]) -> Option<Bytes> {
    loop {
        let mut guard = master.readable().await.ok()?;
        match guard.try_io(|fd| rustix::io::read(fd.get_ref(), &mut *buf).map_err(Into::into)) {
            Ok(Ok(0)) | Ok(Err(_)) => return None,
            Ok(Ok(n)) => {
                crate::hops::mark(crate::hops::Hop::PtyRead);
                if n < buf.len() {
                    guard.clear_ready();
                }
                return Some(Bytes::copy_from_slice(&buf[..n]));
            }
            Err(_would_block) => {}
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "pty_tests.rs"]
mod tests;
