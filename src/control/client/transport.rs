//! How a control client reaches tmux: the pipes of a `tmux -C` process,
//! or a direct link to the server's socket
//! ([`client_protocol`](crate::tmux::client_protocol), no process). Both
//! look the same to the reader and the writer: a byte source that carries
//! control mode's lines and ends with `%exit`, a sink for command lines
//! whose close is stdin's EOF, and a peer to wait for at the end.

use std::future::Future;
use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::unix::pipe;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::process::Child;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// What tmux writes control mode to.
pub(super) enum Source {
    /// `tmux -C`'s stdout.
    Pipe(pipe::Receiver),
    /// The data socket of a direct link.
    Direct(DirectOutput),
}

/// A direct link's data socket, followed by the `%exit` line `tmux -C`
/// would have printed last: the link's end, known once the server let go
/// of the socket (its EOF).
pub(super) struct DirectOutput {
    read: OwnedReadHalf,
    end: Option<oneshot::Receiver<Vec<u8>>>,
    tail: Vec<u8>,
    at: usize,
}

impl DirectOutput {
    pub(super) fn new(read: OwnedReadHalf, end: oneshot::Receiver<Vec<u8>>) -> Self {
        DirectOutput {
            read,
            end: Some(end),
            tail: Vec::new(),
            at: 0,
        }
    }
}

impl AsyncRead for DirectOutput {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        if let Some(end) = &mut this.end {
            let before = buf.filled().len();
            match ready!(Pin::new(&mut this.read).poll_read(cx, buf)) {
                Ok(()) if buf.filled().len() > before => return Poll::Ready(Ok(())),
                Ok(()) => {}
                // A server gone with our lines unread resets the socket;
                // a pipe just ends: the same end here.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
            // EOF: the link's `%exit` line follows (none if the link task
            // is gone without one).
            if let Ok(line) = ready!(Pin::new(end).poll(cx)) {
                this.tail = line;
            }
            this.end = None;
        }
        let rest = this.tail.get(this.at..).unwrap_or_default();
        let n = rest.len().min(buf.remaining());
        buf.put_slice(&rest[..n]);
        this.at += n;
        Poll::Ready(Ok(()))
    }
}

impl Source {
    /// Waits until a read would not block (data, or the end): the reader
    /// holds no read buffer while tmux is quiet, and makes one only then.
    pub(super) async fn readable(&self) -> std::io::Result<()> {
        match self {
            Source::Pipe(pipe) => pipe.readable().await,
            // Past the socket's end, the `%exit` line is served from memory.
            Source::Direct(direct) if direct.end.is_some() => direct.read.readable().await,
            Source::Direct(_) => Ok(()),
        }
    }
}

impl AsyncRead for Source {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Source::Pipe(pipe) => Pin::new(pipe).poll_read(cx, buf),
            Source::Direct(direct) => Pin::new(direct).poll_read(cx, buf),
        }
    }
}

/// Where command lines go; dropping the last handle is stdin's EOF, which
/// ends the client.
#[derive(Debug)]
pub(super) enum Sink {
    /// `tmux -C`'s stdin.
    Pipe(pipe::Sender),
    /// The data socket's writing half (dropping it shuts writing down).
    Socket(OwnedWriteHalf),
}

impl Sink {
    pub(super) fn try_write_vectored(&self, parts: &[IoSlice<'_>]) -> std::io::Result<usize> {
        match self {
            Sink::Pipe(pipe) => pipe.try_write_vectored(parts),
            Sink::Socket(socket) => socket.try_write_vectored(parts),
        }
    }

    pub(super) fn try_write(&self, bytes: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::Pipe(pipe) => pipe.try_write(bytes),
            Sink::Socket(socket) => socket.try_write(bytes),
        }
    }

    pub(super) async fn writable(&self) -> std::io::Result<()> {
        match self {
            Sink::Pipe(pipe) => pipe.writable().await,
            Sink::Socket(socket) => socket.writable().await,
        }
    }
}

/// What the reader waits for once the output ended: the `tmux -C` process
/// to exit, or the link task to have closed the server's socket.
pub(super) enum Peer {
    Child(Child),
    /// The link task.
    Link(JoinHandle<()>),
}

impl Peer {
    /// Waits up to `patience` for the peer to end, then ends it (kills the
    /// process, or drops the link, which makes the server drop the client);
    /// a description of how it ended, for a close reason with no better one.
    pub(super) async fn finish(&mut self, patience: Duration) -> String {
        match self {
            Peer::Child(child) => {
                let status = match tokio::time::timeout(patience, child.wait()).await {
                    Ok(Ok(status)) => Some(status),
                    _ => {
                        let _ = child.start_kill();
                        child.wait().await.ok()
                    }
                };
                match status {
                    Some(s) => format!("tmux -C exited ({s})"),
                    None => "tmux -C exited".to_owned(),
                }
            }
            Peer::Link(task) => {
                if tokio::time::timeout(patience, &mut *task).await.is_err() {
                    task.abort();
                    let _ = (&mut *task).await;
                }
                "the tmux server closed the control link".to_owned()
            }
        }
    }
}
