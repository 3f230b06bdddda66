//! How a client's connection to tmux starts: a `tmux -C` process or a
//! direct link to the server's socket opened (`open`), and the tasks of
//! one connection (the reader, the link task or stderr drain, the writer)
//! started on a client's shared state (`connect`), for the client's first
//! connection and for each one `linger.rs` makes again.

use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;

use super::reader::{LastWords, Reader, drain_stderr};
use super::{ClientOptions, ClientShared, gone_error, handshake, transport, writer};
use crate::control::ControlCodec;
use crate::tmux::client_protocol::{self, End};
use crate::{Error, Result};

/// What a client is started over.
pub(super) enum Launch<'a> {
    /// A `tmux -C ...` process.
    Process(tokio::process::Command),
    /// A direct link to the server on this socket, with this command.
    Direct(&'a std::path::Path, &'a [std::ffi::OsString]),
    /// A connection started before whose attach tmux has not answered
    /// yet ([`Connected::waiting`]): waited on again.
    Waiting(Box<Attaching>),
}

/// Why a start failed.
pub(super) enum Started {
    /// The error the caller gets.
    Failed(Error),
    /// A direct link the server refused (tmux's words): a `tmux -C`
    /// process may still attach.
    Refused(String),
}

/// Where tmux's stderr goes.
enum Stderr {
    Pipe(tokio::process::ChildStderr),
    File(tempfile::TempPath),
    /// A direct link has no process.
    None,
}

/// The peer of a launched transport.
enum Opening {
    Child(tokio::process::Child),
    /// A direct link to serve, and where its `%exit` line goes.
    Link(client_protocol::Link, oneshot::Sender<Vec<u8>>),
}

/// A launched transport, before the client is built around it.
struct Opened {
    /// The command, for errors.
    program: String,
    source: transport::Source,
    sink: transport::Sink,
    peer: Opening,
    stderr: Stderr,
    pid: Option<u32>,
}

/// A connection started by [`connect`].
pub(super) struct Connected {
    /// Whether tmux's first block (the attach) closed without error.
    pub(super) attached: Result<()>,
    /// How a direct link ended, once it has: a refusal falls back.
    pub(super) refusal: Option<Arc<OnceLock<End>>>,
    /// The lines queued for this connection, handed back when it failed:
    /// none of them was written (nothing is, before tmux answered the
    /// attach), so a relink that tmux did not answer can fail them and
    /// queue the next ones (`linger.rs`). `None` once the writer has them.
    pub(super) unsent: Option<mpsc::UnboundedReceiver<bytes::Bytes>>,
    /// The connection, when tmux did not answer its attach in time: still
    /// open, its reader running, it may be answered yet (a stopped server,
    /// continued). A relink waits on it again ([`Launch::Waiting`]) rather
    /// than open another: a stopped server reads every link it holds once
    /// continued, in the same turns, the abandoned ones attaching and
    /// leaving (`%client-detached`), and tmux 3.3a crashes when a
    /// notification meets a client identifying (`handshake.rs`;
    /// docs/control-mode.md).
    /// Dropped, it is left to its reader (closed with the client).
    pub(super) waiting: Option<Attaching>,
}

/// A connection whose reader runs, waiting for tmux's answer to its
/// attach before anything is written to it.
pub(super) struct Attaching {
    /// The command, for errors.
    program: String,
    /// The reader's word on the attach.
    ready: oneshot::Receiver<std::result::Result<(), String>>,
    sink: transport::Sink,
    /// Hangs the writer up (see [`connect`]).
    hangup: CancellationToken,
    refusal: Option<Arc<OnceLock<End>>>,
    /// Lets this connection go (see [`connect`]).
    pub(super) release: CancellationToken,
}

/// Starts a connection to tmux over `launch` for `shared`, whose command
/// lines wait in `lines` until tmux has answered the attach: the reader
/// (detaching when `cancel`, the client's, or `release`, this
/// connection's, is cancelled; a waiting connection has its own), the
/// link task or stderr drain, then the writer. Under the handshake lock
/// until tmux answered. Opening the transport and tmux's answer each wait
/// at most the ready timeout: a stopped server still accepts a link, and
/// its socket may take no more of the identify sequence.
pub(super) async fn connect(
    shared: &Arc<ClientShared>,
    launch: Launch<'_>,
    lines: mpsc::UnboundedReceiver<bytes::Bytes>,
    cancel: CancellationToken,
    release: CancellationToken,
) -> Connected {
    let opts = &shared.opts;
    let handshake = match &opts.handshake_lock {
        Some(path) => {
            handshake::acquire(path, handshake::Create::IfMissing, opts.ready_timeout).await
        }
        None => None,
    };
    let opened = match launch {
        Launch::Waiting(attaching) => Ok(*attaching),
        Launch::Process(command) => {
            open_process(command, opts).map(|opened| start(shared, opened, cancel, release))
        }
        Launch::Direct(socket, argv) => {
            match tokio::time::timeout(opts.ready_timeout, open_direct(socket, argv)).await {
                Ok(opened) => opened.map(|opened| start(shared, opened, cancel, release)),
                Err(_) => Err(Error::Unresponsive {
                    command: "attach-session".to_owned(),
                    timeout: opts.ready_timeout,
                }),
            }
        }
    };
    let mut attaching = match opened {
        Ok(attaching) => attaching,
        Err(error) => {
            return Connected {
                attached: Err(error),
                refusal: None,
                unsent: Some(lines),
                waiting: None,
            };
        }
    };
    let ready = tokio::time::timeout(opts.ready_timeout, &mut attaching.ready).await;
    // Attached (or failed): this client has its control state now.
    drop(handshake);
    let error = match ready {
        Ok(Ok(Ok(()))) => {
            // tmux 3.3a and older read stdin before the attach command
            // has run, so nothing is written until its block closed.
            let Attaching {
                sink,
                hangup,
                refusal,
                ..
            } = attaching;
            writer::start(shared, sink, lines, hangup);
            return Connected {
                attached: Ok(()),
                refusal,
                unsent: None,
                waiting: None,
            };
        }
        Ok(Ok(Err(message))) => Error::Command {
            command: attaching.program,
            message,
        },
        Ok(Err(_)) => gone_error(shared),
        Err(_) => {
            return Connected {
                attached: Err(Error::Unresponsive {
                    command: attaching.program.clone(),
                    timeout: opts.ready_timeout,
                }),
                refusal: attaching.refusal.clone(),
                unsent: Some(lines),
                waiting: Some(attaching),
            };
        }
    };
    Connected {
        attached: Err(error),
        refusal: attaching.refusal,
        unsent: Some(lines),
        waiting: None,
    }
}

/// Starts the tasks of an opened transport: its reader, and its link
/// task or stderr drain.
fn start(
    shared: &Arc<ClientShared>,
    opened: Opened,
    cancel: CancellationToken,
    release: CancellationToken,
) -> Attaching {
    let Opened {
        program,
        source,
        sink,
        peer,
        stderr,
        pid,
    } = opened;
    shared
        .pid
        .store(pid.unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
    // Closing stdin detaches; the reader does it once it may (after
    // taking the handshake lock), not the moment the client is dropped.
    let hangup = CancellationToken::new();
    let (ready_tx, ready) = oneshot::channel();
    let stderr_tail = match stderr {
        Stderr::Pipe(pipe) => {
            let tail = Arc::new(Mutex::new(Vec::new()));
            shared
                .tasks
                .spawn(drain_stderr(pipe, tail.clone(), shared.ended.clone()));
            LastWords::Drained(tail)
        }
        Stderr::File(path) => LastWords::File(path),
        Stderr::None => LastWords::None,
    };
    let (peer, refusal) = match peer {
        Opening::Link(link, exit_line) => {
            let end = Arc::new(OnceLock::new());
            let slot = end.clone();
            let task = shared.tasks.spawn(async move {
                let ended = link.run().await;
                let _ = exit_line.send(ended.exit_line());
                let _ = slot.set(ended);
            });
            (transport::Peer::Link(task), Some(end))
        }
        Opening::Child(child) => (transport::Peer::Child(child), None),
    };
    // No read buffer yet: the reader makes one when tmux has written
    // (`reader.rs`).
    let framed = FramedRead::with_capacity(
        source,
        ControlCodec::with_max_line_length(shared.opts.max_line_length),
        0,
    );
    shared.tasks.spawn(
        Reader {
            shared: shared.clone(),
            cancel,
            release: release.clone(),
            ready: Some(ready_tx),
            exit_reason: None,
            stderr_tail,
        }
        .run(framed, peer, hangup.clone()),
    );
    Attaching {
        program,
        ready,
        sink,
        hangup,
        refusal,
        release,
    }
}

/// Links to the server on `socket` with `argv`.
async fn open_direct(socket: &std::path::Path, argv: &[std::ffi::OsString]) -> Result<Opened> {
    let program = format!(
        "tmux -S {} -C {}",
        socket.display(),
        argv.iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let linked = match client_protocol::connect(socket, argv).await {
        Ok(linked) => linked,
        Err(client_protocol::ConnectError::Io(e)) => {
            return Err(Error::io(format!("linking {program}"), e));
        }
        // What `tmux -N -C` says on stderr and exits with.
        Err(refused) => {
            return Err(Error::Command {
                command: program,
                message: refused.to_string(),
            });
        }
    };
    let (read, write) = linked.data.into_split();
    let (exit_line, exit_rx) = oneshot::channel();
    Ok(Opened {
        program,
        source: transport::Source::Direct(transport::DirectOutput::new(read, exit_rx)),
        sink: transport::Sink::Socket(write),
        peer: Opening::Link(linked.link, exit_line),
        stderr: Stderr::None,
        pid: None,
    })
}

/// Spawns `tmux -C` with piped stdio.
fn open_process(mut command: tokio::process::Command, opts: &ClientOptions) -> Result<Opened> {
    // tmux's last words go to a file in the server's directory when
    // there is one: a pipe and its drain task per client were a
    // descriptor and a task per terminal for words written only when it
    // fails (a serve of 5,000 idle terminals met its open-file limit); a
    // pipe for one that lives only until a linked client takes over (a file
    // is an inode's allocation: `ClientOptions::short_lived`).
    let stderr_file = match &opts.input_dir {
        Some(dir) if !opts.short_lived => tempfile::Builder::new()
            .prefix(".tmux-c-")
            .suffix(".err")
            .tempfile_in(dir)
            .ok()
            .map(tempfile::NamedTempFile::into_parts),
        _ => None,
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
    let mut child = command
        .spawn()
        .map_err(|e| Error::io(format!("spawning {program}"), e))?;
    let io_missing = || Error::io("spawning tmux -C", std::io::Error::other("stdio not piped"));
    let stdin = child.stdin.take().ok_or_else(io_missing)?;
    let stdout = child.stdout.take().ok_or_else(io_missing)?;
    let stderr = match stderr_path {
        Some(path) => Stderr::File(path),
        None => Stderr::Pipe(child.stderr.take().ok_or_else(io_missing)?),
    };
    let sink = stdin
        .into_owned_fd()
        .and_then(tokio::net::unix::pipe::Sender::from_owned_fd)
        .map_err(|e| Error::io("writing to tmux -C", e))?;
    // A pipe rather than tokio's `ChildStdout`: the reader waits for it to
    // be readable before it makes a read buffer (`reader.rs`).
    let source = stdout
        .into_owned_fd()
        .and_then(tokio::net::unix::pipe::Receiver::from_owned_fd)
        .map_err(|e| Error::io("reading from tmux -C", e))?;
    Ok(Opened {
        program,
        source: transport::Source::Pipe(source),
        sink: transport::Sink::Pipe(sink),
        pid: child.id(),
        peer: Opening::Child(child),
        stderr,
    })
}

/// Logs, once per process, that a server refused the direct link.
pub(super) fn refused_once(socket: &std::path::Path, why: &str) {
    static TOLD: std::sync::Once = std::sync::Once::new();
    TOLD.call_once(|| {
        tracing::warn!(
            socket = %socket.display(),
            why,
            "the tmux server refused a direct control link; using a tmux -C process"
        );
    });
}
