//! tmux's client protocol, spoken by the engine itself: a control client
//! with no `tmux -C` process.
//!
//! From tmux 3.2 a control client's process does nothing once it has
//! identified: it passes its stdin and stdout to the server as descriptors
//! (`MSG_IDENTIFY_STDIN`, `MSG_IDENTIFY_STDOUT`; `client_send_identify` in
//! client.c), the server reads commands from one and writes `%`-lines to
//! the other itself (`control_start` in control.c), and the process waits
//! for the message that ends it (`client_dispatch_wait`). Each such
//! process cost an idle terminal ~320 KiB (PSS). [`connect`] does what it
//! did: connects to the server's socket, sends the identify sequence of
//! `tmux -u -N -C ...` with one end of a socket pair as both descriptors,
//! then the command; the caller reads and writes the other end as it read
//! and wrote the process's pipes, and runs [`Link::run`], which answers the
//! server's messages as the process did and ends with the `%exit` line the
//! process would have printed.
//!
//! `wire` holds the bytes (header, numbers, payloads) and their tests.

mod wire;

use std::ffi::OsString;
use std::io::IoSlice;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::net::{
    AddressFamily, SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::UnixStream;
use tracing::{debug, warn};

use wire::{Outgoing, msg};

/// Why [`connect`] failed.
#[derive(Debug)]
pub(crate) enum ConnectError {
    /// Nothing answers the socket: tmux's own words for it (`no server
    /// running on PATH`, `error connecting to PATH (...)`). `tmux -N`
    /// fails the same way: no server is started.
    NoServer(String),
    /// The command does not fit one message (`command too long`).
    TooLong,
    /// The socket pair or a send failed.
    Io(std::io::Error),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::NoServer(text) => f.write_str(text),
            ConnectError::TooLong => f.write_str("command too long"),
            ConnectError::Io(e) => write!(f, "identifying to the tmux server: {e}"),
        }
    }
}

/// A control client linked to its server.
#[derive(Debug)]
pub(crate) struct Connected {
    /// What the server reads commands from and writes control mode's
    /// `%`-lines to (the process's stdin and stdout). Shutting its writing
    /// side down is stdin's EOF: the server lets the client go.
    pub(crate) data: UnixStream,
    /// The server's messages; served by [`Link::run`] while the client
    /// lives (dropping it makes the server drop the client).
    pub(crate) link: Link,
}

/// How the link ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum End {
    /// The client's end, with the reason `tmux -C` prints after `%exit`
    /// (none for a plain `%exit`).
    Exit(Option<String>),
    /// The server does not speak this client's protocol (another
    /// `PROTOCOL_VERSION`, or one older than 3.2): tmux's words for it.
    /// A `tmux -C` process of the server's own binary can still attach.
    Refused(String),
}

impl End {
    /// The `%exit` line `tmux -C` prints last (`client_main`).
    pub(crate) fn exit_line(&self) -> Vec<u8> {
        match self {
            End::Exit(Some(reason)) => format!("%exit {reason}\n").into_bytes(),
            End::Exit(None) | End::Refused(_) => b"%exit\n".to_vec(),
        }
    }
}

/// Connects to the server on `socket` and sends what `tmux -u -N -S SOCKET
/// -C ARGV...` sends: the identify sequence, then `argv` as the command.
///
/// # Errors
/// [`ConnectError`]: no server, a command too long, or I/O.
pub(crate) async fn connect(socket: &Path, argv: &[OsString]) -> Result<Connected, ConnectError> {
    let command = wire::command(argv).ok_or(ConnectError::TooLong)?;
    let stream = UnixStream::connect(socket).await.map_err(|e| {
        ConnectError::NoServer(match e.raw_os_error() {
            Some(code) if code == rustix::io::Errno::CONNREFUSED.raw_os_error() => {
                format!("no server running on {}", socket.display())
            }
            _ => format!(
                "error connecting to {} ({})",
                socket.display(),
                strerror(&e)
            ),
        })
    })?;
    // Close-on-exec: a child the engine forks meanwhile must not keep the
    // server's end open (its EOF is how the client learns the end).
    let (ours, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| ConnectError::Io(e.into()))?;
    let env = environ();
    let term = std::env::var_os("TERM").unwrap_or_default();
    let cwd = std::env::current_dir()
        .ok()
        .or_else(|| std::env::var_os("HOME").map(Into::into))
        .unwrap_or_else(|| "/".into());
    let who = wire::Identity {
        term: term.as_bytes(),
        cwd: cwd.as_os_str().as_bytes(),
        pid: i32::try_from(std::process::id()).unwrap_or(i32::MAX),
        environ: env.iter().map(|v| v.as_bytes()).collect(),
    };
    let mut messages = wire::identify(&who);
    messages.push(command);
    match send(&stream, &messages, &theirs).await {
        Ok(()) => {}
        // The server hung up in the middle: one that refuses the client
        // (`MSG_VERSION`) drops it right after saying so, maybe before
        // the sequence is out; or it died. What it sent first, if
        // anything, is for the link to read: the refusal, else the end.
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
            ) =>
        {
            debug!(error = %e, "the tmux server hung up while the client identified");
        }
        Err(e) => return Err(ConnectError::Io(e)),
    }
    // The server holds its two copies now; ours would keep the data
    // socket from ever reaching EOF.
    drop(theirs);
    let data = std::os::unix::net::UnixStream::from(ours);
    data.set_nonblocking(true).map_err(ConnectError::Io)?;
    let data = UnixStream::from_std(data).map_err(ConnectError::Io)?;
    Ok(Connected {
        data,
        link: Link {
            socket: stream,
            buf: Vec::new(),
        },
    })
}

/// The environment `tmux -C` would send: the engine's, minus `TMUX` and
/// `TMUX_PANE` (which the engine's `tmux` commands drop too), as
/// `NAME=VALUE`.
fn environ() -> Vec<OsString> {
    std::env::vars_os()
        .filter(|(k, _)| k != "TMUX" && k != "TMUX_PANE")
        .map(|(k, v)| {
            let mut s = k;
            s.push("=");
            s.push(v);
            s
        })
        .collect()
}

/// `strerror`'s text of an I/O error, without Rust's `(os error N)`.
fn strerror(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// Sends `messages` in order as `msgbuf_write` does: a descriptor rides
/// with the first byte of its message, one per `sendmsg` (tmux's
/// `imsg_read` keeps one descriptor per read and closes any other).
async fn send(stream: &UnixStream, messages: &[Outgoing], fd: &OwnedFd) -> std::io::Result<()> {
    let mut batch: Vec<u8> = Vec::new();
    for m in messages {
        if m.with_fd {
            send_bytes(stream, &batch, None).await?;
            batch.clear();
            send_bytes(stream, &m.bytes, Some(fd)).await?;
        } else {
            batch.extend_from_slice(&m.bytes);
        }
    }
    send_bytes(stream, &batch, None).await
}

async fn send_bytes(
    stream: &UnixStream,
    mut bytes: &[u8],
    fd: Option<&OwnedFd>,
) -> std::io::Result<()> {
    let mut fd = fd.map(AsFd::as_fd);
    while !bytes.is_empty() {
        let n = stream
            .async_io(Interest::WRITABLE, || {
                let fds = fd.as_slice();
                let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
                let mut control = SendAncillaryBuffer::new(&mut space);
                if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
                    return Err(std::io::Error::other("no room for a descriptor"));
                }
                rustix::net::sendmsg(
                    stream,
                    &[IoSlice::new(bytes)],
                    &mut control,
                    SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
                )
                .map_err(std::io::Error::from)
            })
            .await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        // The descriptor went with the first byte sent.
        fd = None;
        bytes = bytes.get(n..).unwrap_or_default();
    }
    Ok(())
}

/// The imsg side of a linked control client: the server's messages.
#[derive(Debug)]
pub(crate) struct Link {
    socket: UnixStream,
    buf: Vec<u8>,
}

impl Link {
    /// Answers the server's messages as `tmux -C` does while it waits
    /// (`client_dispatch_wait`: a control client is never sent
    /// `MSG_READY`) until the client's end; the socket closes with the
    /// returned value, and the server then lets go of the data socket.
    pub(crate) async fn run(mut self) -> End {
        let lost = || End::Exit(Some("server exited unexpectedly".to_owned()));
        let mut chunk = vec![0u8; 4096];
        loop {
            let n = match self.socket.read(&mut chunk).await {
                Ok(0) | Err(_) => return lost(),
                Ok(n) => n,
            };
            self.buf.extend_from_slice(&chunk[..n]);
            let messages = match wire::decode(&mut self.buf) {
                Ok(messages) => messages,
                Err(wire::Malformed(what)) => {
                    warn!(what, "tmux sent a malformed message; leaving");
                    return lost();
                }
            };
            for m in messages {
                if let Some(end) = self.dispatch(m).await {
                    return end;
                }
            }
        }
    }

    /// One message; `Some` when it ends the client.
    async fn dispatch(&mut self, m: wire::Incoming) -> Option<End> {
        // `peer_check_version`: the client leaves a server of another
        // protocol version, whatever it sent; `MSG_VERSION` is the
        // server's own word for it.
        if m.kind == msg::VERSION || m.version != wire::PROTOCOL_VERSION {
            return Some(End::Refused(format!(
                "protocol version mismatch (client {}, server {})",
                wire::PROTOCOL_VERSION,
                m.version
            )));
        }
        match m.kind {
            msg::EXIT | msg::SHUTDOWN => Some(End::Exit(wire::exit_message(&m.payload))),
            msg::EXITED => Some(End::Exit(None)),
            msg::DETACH | msg::DETACHKILL => self.reply(msg::EXITING, &[]).await,
            msg::OLDSTDERR | msg::OLDSTDIN | msg::OLDSTDOUT => Some(End::Refused(
                "server version is too old for client".to_owned(),
            )),
            msg::READ_OPEN | msg::WRITE_OPEN => {
                // An attached client's files are the server's to open;
                // only a client not attached is asked, and the engine
                // gives none a file command before its attach.
                let answer = if m.kind == msg::READ_OPEN {
                    msg::READ_DONE
                } else {
                    msg::WRITE_READY
                };
                let stream = wire::stream_of(&m.payload)?;
                warn!(
                    stream,
                    "tmux asked the control client to open a file; refused"
                );
                let ebadf = rustix::io::Errno::BADF.raw_os_error();
                let refusal = wire::refuse_file(answer, stream, ebadf)?;
                self.reply_raw(&refusal).await
            }
            // New client flags: only `wait-exit` would matter here (a
            // wait for an empty line after `%exit`), and the engine never
            // sets it.
            msg::FLAGS => None,
            // Sent to clients that are not control clients only.
            msg::READY => None,
            kind => {
                // File data of a refused stream, messages of attached
                // clients.
                debug!(kind, "tmux message ignored by the control client");
                None
            }
        }
    }

    async fn reply(&mut self, kind: u32, payload: &[u8]) -> Option<End> {
        let m = wire::encode(kind, payload, false)?;
        self.reply_raw(&m).await
    }

    /// Sends `m`; a server gone meanwhile ends the client as lost.
    async fn reply_raw(&mut self, m: &Outgoing) -> Option<End> {
        match self.socket.write_all(&m.bytes).await {
            Ok(()) => None,
            Err(_) => Some(End::Exit(Some("server exited unexpectedly".to_owned()))),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn exit_lines_are_what_tmux_c_prints() {
        assert_eq!(End::Exit(None).exit_line(), b"%exit\n");
        assert_eq!(
            End::Exit(Some("too far behind".into())).exit_line(),
            b"%exit too far behind\n"
        );
        assert_eq!(End::Refused("x".into()).exit_line(), b"%exit\n");
    }

    #[tokio::test]
    async fn no_server_is_tmux_n_s_words() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("none.sock");
        let err = connect(&missing, &["attach-session".into()])
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "error connecting to {} (No such file or directory)",
                missing.display()
            )
        );
        // A stale socket: bound, nobody listening.
        let stale = dir.path().join("stale.sock");
        drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
        let err = connect(&stale, &["attach-session".into()])
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("no server running on {}", stale.display())
        );
    }

    /// Kills the test's tmux server when dropped, even on a panic.
    struct KillServer(std::path::PathBuf);

    impl Drop for KillServer {
        fn drop(&mut self) {
            let _ = std::process::Command::new("tmux")
                .arg("-S")
                .arg(&self.0)
                .arg("kill-server")
                .stderr(std::process::Stdio::null())
                .status();
        }
    }

    /// A link the server has read only part of (the server reads up to
    /// each descriptor's message at a time, one read an event-loop turn)
    /// must not yet be a control client: tmux 3.3a writes notifications to
    /// every client flagged `CLIENT_CONTROL` (`control_notify_session_created`
    /// in control-notify.c), whose control state only exists from
    /// `MSG_IDENTIFY_DONE` (`control_start`), and `control_write` of a
    /// client without one is a NULL dereference: the server died. Forced
    /// here by sending all but the last read's messages, then a
    /// notification (`%sessions-changed`).
    #[tokio::test]
    async fn a_half_read_identify_leaves_the_server_alive() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s.sock");
        let tmux = |args: &[&str]| {
            std::process::Command::new("tmux")
                .arg("-S")
                .arg(&socket)
                .args(["-f", "/dev/null"])
                .args(args)
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap()
                .success()
        };
        assert!(tmux(&["new-session", "-d", "-s", "main", "sleep 300"]));
        let _kill = KillServer(socket.clone());
        let stream = UnixStream::connect(&socket).await.unwrap();
        let (_ours, theirs) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::CLOEXEC,
            None,
        )
        .unwrap();
        let env = environ();
        let who = wire::Identity {
            term: b"",
            cwd: b"/",
            pid: i32::try_from(std::process::id()).unwrap(),
            environ: env.iter().map(|v| v.as_bytes()).collect(),
        };
        let messages = wire::identify(&who);
        // A read of the server ends after a descriptor's message (the
        // kernel never merges past one): everything up to the last is
        // what it can hold while the rest is not read yet.
        let last = messages.iter().rposition(|m| m.with_fd).unwrap();
        send(&stream, &messages[..=last], &theirs).await.unwrap();
        // A round trip of another client: the server's loop turned past
        // the reads of what was sent.
        assert!(tmux(&["display-message", "-p", "x"]));
        assert!(tmux(&["new-session", "-d", "-s", "other", "sleep 300"]));
        assert!(
            tmux(&["has-session", "-t", "=main"]),
            "the tmux server died of a half-identified control client"
        );
        drop(stream);
    }

    /// A fake server end: what the link sends is the identify sequence
    /// with two descriptors of one socket, then the command; a
    /// `MSG_DETACH` is answered with `MSG_EXITING`, `MSG_EXITED` ends it.
    #[tokio::test]
    async fn the_link_sends_identify_and_answers_the_server() {
        use std::io::Read as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let argv: Vec<OsString> = vec!["attach-session".into(), "-t".into(), "=x".into()];
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut got = Vec::new();
            let mut fds = Vec::new();
            let mut buf = vec![0u8; 65536];
            loop {
                let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
                let mut control = rustix::net::RecvAncillaryBuffer::new(&mut space);
                let r = rustix::net::recvmsg(
                    &conn,
                    &mut [std::io::IoSliceMut::new(&mut buf)],
                    &mut control,
                    rustix::net::RecvFlags::empty(),
                )
                .unwrap();
                for m in control.drain() {
                    if let rustix::net::RecvAncillaryMessage::ScmRights(f) = m {
                        fds.extend(f);
                    }
                }
                got.extend_from_slice(&buf[..r.bytes]);
                let mut probe = got.clone();
                let messages = wire::decode(&mut probe).unwrap();
                if messages.last().is_some_and(|m| m.kind == msg::COMMAND) {
                    // Detach, then read the answer.
                    use std::io::Write as _;
                    conn.write_all(&wire::encode(msg::DETACH, b"x\0", false).unwrap().bytes)
                        .unwrap();
                    let mut answer = [0u8; 16];
                    conn.read_exact(&mut answer).unwrap();
                    let mut a = answer.to_vec();
                    let answer = wire::decode(&mut a).unwrap();
                    conn.write_all(&wire::encode(msg::EXITED, &[], false).unwrap().bytes)
                        .unwrap();
                    // The link closes its socket once it ended.
                    assert_eq!(conn.read(&mut buf).unwrap(), 0);
                    return (messages, fds, answer);
                }
            }
        });
        let linked = connect(&path, &argv).await.unwrap();
        let end = tokio::time::timeout(std::time::Duration::from_secs(10), linked.link.run())
            .await
            .unwrap();
        assert_eq!(end, End::Exit(None));
        let (messages, mut fds, answer) =
            tokio::task::spawn_blocking(move || server.join().unwrap())
                .await
                .unwrap();
        let kinds: Vec<u32> = messages.iter().map(|m| m.kind).collect();
        assert_eq!(&kinds[..5], [101, 109, 102, 108, 107]);
        assert_eq!(
            kinds[kinds.len() - 6..],
            [104, 110, 100, 111, 106, msg::COMMAND]
        );
        assert!(messages.iter().all(|m| m.version == 8));
        let command = &messages.last().unwrap().payload;
        assert_eq!(&command[..4], &3i32.to_ne_bytes());
        assert_eq!(&command[4..], b"attach-session\0-t\0=x\0");
        assert_eq!(answer.len(), 1);
        assert_eq!(answer[0].kind, msg::EXITING);
        // Both descriptors are the data socket: what the server writes on
        // one, the client reads.
        assert_eq!(fds.len(), 2);
        let mut out = std::os::unix::net::UnixStream::from(fds.pop().unwrap());
        std::io::Write::write_all(&mut out, b"%begin 1 1 0\n").unwrap();
        let mut data = linked.data;
        let mut line = [0u8; 13];
        data.read_exact(&mut line).await.unwrap();
        assert_eq!(&line, b"%begin 1 1 0\n");
    }
}
