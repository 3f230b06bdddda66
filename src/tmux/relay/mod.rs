//! The raw output path's plumbing: how a pane's bytes reach every engine
//! process on the host exactly, without control mode's `\ooo` escaping,
//! counted once.
//!
//! tmux's `pipe-pane` writes every byte it reads from the pane to a
//! socketpair whose other end is the pipe command's stdin
//! (`cmd-pipe-pane.c`), and a pane has one pipe: a second `pipe-pane`
//! closes the first. The command is a resident relay ([`resident`]):
//! `tmux-engine __stream-relay DIR` reads the pipe for as long as the pane
//! lives, numbers its bytes in an epoch of its own, holds the newest of
//! them, and serves them to any number of engine processes on
//! [`STREAM_SOCKET`] in the server's private directory ([`wire`] is what
//! they say). The process that starts the server listens on
//! [`RAW_SOCKET`] first, and the relay links it from byte 0 before the
//! program prints; any other process (a second `mcp`, `serve`, the CLI)
//! links with [`link`] from the offset it wants. tmux keeps a piped pane
//! alive until its pipe has taken the last byte
//! (`window_pane_destroy_ready`), and the relay answers the exit handshake
//! once it has read the wrapper's marker, so a fast exit's last output is
//! held by the relay when tmux calls the pane dead; a process that learnt
//! of the death asks for a [`wire::Frame::Synced`] before it reports it.
//!
//! The relay is an executable (`default_relay`): this crate's own binary
//! (`tmux-engine`), which answers [`RELAY_ARG`] before parsing anything
//! else. Where none is known the engine falls back to `%output`, and its
//! stream is its own.

mod ends;
mod resident;
pub(crate) mod wire;

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use crate::{Error, Result};
use wire::{Frame, Request};

/// The first argument that makes the `tmux-engine` binary a relay.
pub const RELAY_ARG: &str = "__stream-relay";
/// Names the relay executable (one that answers [`RELAY_ARG`], such as
/// the `tmux-engine` binary); empty turns the raw path off (see
/// [`default_relay`]).
pub(crate) const RELAY_ENV: &str = "TMUX_ENGINE_RELAY";
/// Where the process starting a server listens for its relay's first
/// link (in the server directory).
pub(crate) const RAW_SOCKET: &str = "raw.sock";
/// Where a running relay serves every other process (in the server
/// directory).
pub(crate) const STREAM_SOCKET: &str = "stream.sock";

/// The command, in a control client's own command list, that keeps
/// `%output` from it: its bytes come from the relay. The client flag
/// `no-output` (tmux 3.2+), not the pane's `refresh-client -A '%0:off'`:
/// since 3.4 (tmux commit ee431d48, "do not ignore the off flag") tmux
/// stops reading a pane whose every attached client is a control client
/// with it off (`server_client_check_pane_buffer`), whatever its pipe
/// wants, so the relay got no byte after the prompt; a `no-output` client
/// never holds a pane back. A server has one pane, so the flag silences
/// only it. (`%0:off` with output queued could also make tmux 3.3a skip
/// the queue's offset and abort in `control_append_data`.)
pub(crate) const QUIET_OUTPUT: [&str; 3] = ["refresh-client", "-f", "no-output"];

/// The small relay executable installed beside `tmux-engine`.
pub const RELAY_BINARY: &str = "tmux-engine-relay";

/// The relay the engine uses by default: `$TMUX_ENGINE_RELAY` when set
/// (empty: none), else, when the running executable is `tmux-engine` (its
/// command line and `serve`), [`RELAY_BINARY`] beside it, or the engine
/// itself where that is missing (it answers [`RELAY_ARG`] too, at the
/// cost of its whole relocated image per terminal). `None`: output rides
/// `%output`, as it does for a library whose program is not the engine's
/// binary.
pub(crate) fn default_relay() -> Option<PathBuf> {
    match std::env::var_os(RELAY_ENV) {
        Some(path) if path.is_empty() => None,
        Some(path) => Some(PathBuf::from(path)),
        None => {
            let exe = std::env::current_exe().ok()?;
            if exe.file_name()? != "tmux-engine" {
                return None;
            }
            let small = exe.with_file_name(RELAY_BINARY);
            Some(if small.is_file() { small } else { exe })
        }
    }
}

/// The `pipe-pane` shell command that runs `relay` for the server
/// directory `dir` (`joined`: on a pane whose program already runs), or
/// `None` when either path cannot be carried: tmux format-expands the
/// command (`#`) and runs it through `strftime` (`%`), and the words are
/// single-quoted for `sh`.
pub(crate) fn pipe_command(relay: &Path, dir: &Path, joined: bool) -> Option<String> {
    let usable = |path: &Path| {
        let text = path.to_str()?;
        let plain = path.is_absolute() && !text.contains(['#', '%', '\'', '\n', '\0']);
        plain.then_some(text.to_owned())
    };
    let (relay, dir) = (usable(relay)?, usable(dir)?);
    // Only an executable file: a relay that cannot run would leave the
    // pane's output going nowhere.
    super::process::runnable(Path::new(&relay)).then_some(())?;
    let joined = if joined { " joined" } else { "" };
    // With its slash, the directory shows in the relay's command line as
    // every path in it does in tmux's (`ps`, and reapers that judge a
    // process by the directory it names).
    let dir = dir.trim_end_matches('/');
    Some(format!("exec '{relay}' {RELAY_ARG} '{dir}/'{joined}"))
}

/// The relay itself, run by tmux's `pipe-pane` with the pane's pipe as
/// stdin: serves the pane's stream to every linked process until the
/// pipe closes (see the `resident` module). `joined`: it starts on a pane whose
/// program already runs, so its byte 0 is not the program's first.
///
/// # Errors
/// The I/O error that kept it from binding its socket or reading the pipe.
pub fn relay(dir: &Path, joined: bool, keeper: &mut dyn Keeper) -> io::Result<()> {
    resident::run(dir, joined, keeper)
}

/// What a relay does with its stream beyond serving it: keeps it on disk
/// (the engine's kept history: `RelayKeeper`, which the engine's binaries
/// hand over), once a linked process asks (a keep request). The relay
/// calls it on its own thread, between polls: each call blocks the relay,
/// so it writes and returns.
pub trait Keeper {
    /// Starts keeping stream `epoch` from its offset `from`, as the order
    /// file in the server directory `dir` says; `oldest`: the oldest byte
    /// the relay still holds (past `from` when bytes asked for were
    /// evicted already: the history keeps a hole for them, so the stream's
    /// other offsets keep naming their own bytes). Returns the offset it
    /// keeps from (`oldest`, or later when the history has those bytes
    /// already). An error: the stream is not kept (the asking process
    /// keeps it itself where it can).
    ///
    /// # Errors
    /// Why it cannot keep (no order, the history written by another).
    fn start(&mut self, dir: &Path, epoch: u64, from: u64, oldest: u64) -> io::Result<u64>;

    /// The stream's next bytes, in order, from `from` on.
    fn write(&mut self, bytes: &[u8]);

    /// When [`tick`](Keeper::tick) is due (writes to save, a title to
    /// note); `None` while nothing is, so an idle relay sleeps.
    fn due(&self) -> Option<std::time::Instant>;

    /// Does what was due.
    fn tick(&mut self);

    /// The stream ended: saves everything and lets go of the history, so
    /// whoever removes it after a kill no longer waits.
    fn finish(&mut self);
}

/// A relay that keeps nothing on disk (a library's own relay).
#[derive(Debug, Default)]
pub struct KeepNothing;

impl Keeper for KeepNothing {
    fn start(&mut self, _: &Path, _: u64, _: u64, _: u64) -> io::Result<u64> {
        Err(io::Error::other("this relay keeps no history"))
    }
    fn write(&mut self, _: &[u8]) {}
    fn due(&self) -> Option<std::time::Instant> {
        None
    }
    fn tick(&mut self) {}
    fn finish(&mut self) {}
}

/// Asks the relay of the server in `dir` to keep stream `epoch` on disk
/// from `from` (its order file written there first): the first offset
/// it keeps, or `None` when it does not (no relay runs, one of an older
/// engine, another epoch, or its keeper refused).
///
/// # Errors
/// `IO` when a relay answers but breaks the protocol; `UNRESPONSIVE` when
/// it does not answer within `timeout`.
pub(crate) async fn keep(
    dir: &Path,
    epoch: u64,
    from: u64,
    timeout: Duration,
) -> Result<Option<u64>> {
    let path = dir.join(STREAM_SOCKET);
    let Some(mut socket) = connect(&path).await? else {
        return Ok(None);
    };
    let answer = tokio::time::timeout(timeout, async {
        socket
            .write_all(&wire::encode_request(Request::Keep { epoch, from }))
            .await?;
        let mut buf = BytesMut::with_capacity(16);
        loop {
            match wire::decode(&mut buf) {
                Ok(Some(Frame::Kept { from })) => {
                    return Ok((from != wire::NOT_KEPT).then_some(from));
                }
                Ok(Some(other)) => {
                    return Err(io::Error::other(format!(
                        "the relay answered a keep with {other:?}"
                    )));
                }
                Ok(None) => {}
                Err(bad) => return Err(io::Error::other(format!("the relay sent {}", bad.0))),
            }
            // Closed unanswered: a relay that does not know the request.
            if socket.read_buf(&mut buf).await? == 0 {
                return Ok(None);
            }
        }
    })
    .await;
    match answer {
        Ok(Ok(from)) => Ok(from),
        Ok(Err(e)) => Err(Error::io(format!("asking {} to keep", path.display()), e)),
        Err(_) => Err(Error::Unresponsive {
            command: format!("the output relay on {}", path.display()),
            timeout,
        }),
    }
}

/// A link to a terminal's relay, its hello read: the stream's epoch and
/// where this link's bytes start. What follows on `socket` are frames
/// ([`wire::decode`]), the first of them possibly in `buf` already.
#[derive(Debug)]
pub struct Linked {
    pub(crate) socket: UnixStream,
    pub(crate) buf: BytesMut,
    /// The stream's epoch: every process linked to this relay counts in it.
    pub epoch: u64,
    /// The offset of the first byte this link gets.
    pub start: u64,
    /// Whether the stream's byte 0 is its program's first.
    pub first: bool,
}

impl Linked {
    /// Reads the hello off `socket`; `None` when it closed first (the
    /// relay was ending).
    async fn hello(mut socket: UnixStream, what: &str) -> io::Result<Option<Linked>> {
        let mut buf = BytesMut::with_capacity(64);
        loop {
            match wire::decode(&mut buf) {
                Ok(Some(Frame::Hello {
                    version,
                    epoch,
                    start,
                    first,
                })) => {
                    if version != wire::VERSION {
                        return Err(io::Error::other(format!(
                            "{what} speaks version {version}, this engine {}",
                            wire::VERSION
                        )));
                    }
                    return Ok(Some(Linked {
                        socket,
                        buf,
                        epoch,
                        start,
                        first,
                    }));
                }
                Ok(Some(other)) => {
                    return Err(io::Error::other(format!(
                        "{what} began with {other:?}, not its hello"
                    )));
                }
                Ok(None) => {}
                Err(bad) => return Err(io::Error::other(format!("{what} sent {}", bad.0))),
            }
            if socket.read_buf(&mut buf).await? == 0 {
                return Ok(None);
            }
        }
    }
}

/// Connects to a relay's socket at `path`; `None` when no relay listens
/// there (none was started, or it ended).
async fn connect(path: &Path) -> Result<Option<UnixStream>> {
    match UnixStream::connect(path).await {
        Ok(socket) => Ok(Some(socket)),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(Error::io(format!("linking to {}", path.display()), e)),
    }
}

/// Links to the relay of the server in `dir` from `offset` of stream
/// `epoch` (0 and [`wire::OLDEST`]: from the oldest byte it holds; an
/// offset it no longer holds, or of another epoch, starts there too, as
/// the hello says). `Ok(None)`: no relay runs there (none was started, or
/// it ended: its pane or server is gone, or its pipe was replaced).
///
/// # Errors
/// `IO` when a relay answers but breaks the protocol; `UNRESPONSIVE` when
/// it does not say hello within `timeout`.
pub(crate) async fn link(
    dir: &Path,
    epoch: u64,
    offset: u64,
    timeout: Duration,
) -> Result<Option<Linked>> {
    let path = dir.join(STREAM_SOCKET);
    let Some(mut socket) = connect(&path).await? else {
        return Ok(None);
    };
    let linked = tokio::time::timeout(timeout, async {
        socket
            .write_all(&wire::encode_request(Request::From { epoch, offset }))
            .await?;
        Linked::hello(socket, "the relay").await
    })
    .await;
    match linked {
        // `None`: it closed at once, ending (its pipe closed).
        Ok(Ok(linked)) => Ok(linked),
        Ok(Err(e)) => Err(Error::io(format!("linking to {}", path.display()), e)),
        Err(_) => Err(Error::Unresponsive {
            command: format!("the output relay on {}", path.display()),
            timeout,
        }),
    }
}

/// The listener a new server's relay links to first, bound before tmux
/// runs the pipe command (else the relay finds nobody and this process
/// would link later, from whatever it still holds). The socket file is
/// removed on drop.
#[derive(Debug)]
pub(crate) struct RelayListener {
    listener: tokio::net::UnixListener,
    path: PathBuf,
}

impl RelayListener {
    /// Binds at `path` (in a private server directory).
    ///
    /// # Errors
    /// `IO` when the socket cannot be bound.
    pub fn bind(path: &Path) -> Result<RelayListener> {
        let _ = std::fs::remove_file(path);
        let listener = tokio::net::UnixListener::bind(path)
            .map_err(|e| Error::io(format!("binding {}", path.display()), e))?;
        Ok(RelayListener {
            listener,
            path: path.to_owned(),
        })
    }

    /// The relay's link from byte 0, once it has said hello.
    ///
    /// # Errors
    /// `UNRESPONSIVE` when no relay links within `timeout`; `IO` when the
    /// link breaks the protocol.
    pub async fn accept(&self, timeout: Duration) -> Result<Linked> {
        let linked = tokio::time::timeout(timeout, async {
            let (socket, _) = self.listener.accept().await?;
            Linked::hello(socket, "the new relay").await
        })
        .await;
        match linked {
            Ok(Ok(Some(linked))) => Ok(linked),
            Ok(Ok(None)) => Err(Error::io(
                "linking to the output relay",
                io::Error::other("the new relay closed before its hello"),
            )),
            Ok(Err(e)) => Err(Error::io("linking to the output relay", e)),
            Err(_) => Err(Error::Unresponsive {
                command: format!("the output relay on {}", self.path.display()),
                timeout,
            }),
        }
    }
}

impl Drop for RelayListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipe_command_refuses_what_tmux_or_sh_would_rewrite() {
        let sh = Path::new("/bin/sh");
        let dir = Path::new("/tmp/d");
        assert_eq!(
            pipe_command(sh, dir, false).as_deref(),
            Some("exec '/bin/sh' __stream-relay '/tmp/d/'")
        );
        assert_eq!(
            pipe_command(sh, dir, true).as_deref(),
            Some("exec '/bin/sh' __stream-relay '/tmp/d/' joined")
        );
        for bad in ["/tmp/a#b", "/tmp/a%Y", "/tmp/a'b", "rel"] {
            assert_eq!(pipe_command(sh, Path::new(bad), false), None, "{bad}");
        }
        assert_eq!(
            pipe_command(Path::new("/nonexistent/relay"), dir, false),
            None
        );
    }
}
