//! The raw output path's plumbing: how a pane's bytes reach the engine
//! without control mode's `\ooo` escaping.
//!
//! tmux's `pipe-pane` writes every byte it reads from the pane to a
//! socketpair whose other end is the pipe command's stdin
//! (`cmd-pipe-pane.c`). The command is a relay: `tmux-engine __raw-relay
//! SOCK` connects to a listener the engine bound in the server's private
//! directory, hands its stdin over with `SCM_RIGHTS` and exits. From then
//! on the engine itself is the pipe's reader: no `cat` stays resident and
//! no byte is escaped. tmux keeps a piped pane alive until its pipe has
//! taken the last byte (`window_pane_destroy_ready`), so a fast exit's last
//! output is in the socket by the time tmux calls the pane dead.
//!
//! The relay is an executable (`default_relay`): this crate's own binary
//! (`tmux-engine`), which answers [`RELAY_ARG`] before parsing anything
//! else. Where none is known the engine falls back to `%output`.

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

use crate::{Error, Result};

/// The first argument that makes the `tmux-engine` binary a relay.
pub const RELAY_ARG: &str = "__raw-relay";
/// Names the relay executable (one that answers [`RELAY_ARG`], such as
/// the `tmux-engine` binary); empty turns the raw path off (see
/// [`default_relay`]).
pub(crate) const RELAY_ENV: &str = "TMUX_ENGINE_RELAY";
/// The listener's file name in the server directory.
pub(crate) const RAW_SOCKET: &str = "raw.sock";

/// The relay the engine uses by default: `$TMUX_ENGINE_RELAY` when set
/// (empty: none), else the running executable when it is `tmux-engine`
/// (its command line and `serve`). `None`: output rides `%output`, as it
/// does for a library whose program is not the engine's binary.
pub(crate) fn default_relay() -> Option<PathBuf> {
    match std::env::var_os(RELAY_ENV) {
        Some(path) if path.is_empty() => None,
        Some(path) => Some(PathBuf::from(path)),
        None => {
            let exe = std::env::current_exe().ok()?;
            (exe.file_name()? == "tmux-engine").then_some(exe)
        }
    }
}

/// The `pipe-pane` shell command that runs `relay` towards `socket`, or
/// `None` when either path cannot be carried: tmux format-expands the
/// command (`#`) and runs it through `strftime` (`%`), and the words are
/// single-quoted for `sh`.
pub(crate) fn pipe_command(relay: &Path, socket: &Path) -> Option<String> {
    let usable = |path: &Path| {
        let text = path.to_str()?;
        let plain = path.is_absolute() && !text.contains(['#', '%', '\'', '\n', '\0']);
        plain.then_some(text.to_owned())
    };
    let (relay, socket) = (usable(relay)?, usable(socket)?);
    // Only an executable file: a relay that cannot run would leave the
    // pane's output going nowhere.
    rustix::fs::access(relay.as_str(), rustix::fs::Access::EXEC_OK).ok()?;
    Path::new(&relay).is_file().then_some(())?;
    Some(format!("exec '{relay}' {RELAY_ARG} '{socket}'"))
}

/// The relay itself: connects to `socket` and hands it this process's
/// stdin (the pipe tmux writes the pane's output to), then returns; the
/// process exits and the engine holds the only reader.
///
/// # Errors
/// The I/O error of the connect or the send.
pub fn relay(socket: &Path) -> io::Result<()> {
    let stream = std::os::unix::net::UnixStream::connect(socket)?;
    let stdin = io::stdin();
    let fds = [stdin.as_fd()];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(io::Error::other("no room for the descriptor"));
    }
    rustix::net::sendmsg(
        &stream,
        &[IoSlice::new(b"R")],
        &mut control,
        SendFlags::empty(),
    )?;
    Ok(())
}

/// The listener a relay connects to, bound before tmux runs the pipe
/// command (else the relay finds nobody and the output is lost). The
/// socket file is removed on drop.
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

    /// The pane's pipe, once the relay has handed it over.
    ///
    /// # Errors
    /// `UNRESPONSIVE` when no relay connects within `timeout`; `IO` when
    /// the connection carries no descriptor.
    pub async fn accept(&self, timeout: Duration) -> Result<OwnedFd> {
        let received = tokio::time::timeout(timeout, async {
            let (stream, _) = self.listener.accept().await?;
            loop {
                stream.readable().await?;
                match stream.try_io(tokio::io::Interest::READABLE, || receive_fd(&stream)) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                    other => return other,
                }
            }
        })
        .await;
        match received {
            Ok(Ok(fd)) => Ok(fd),
            Ok(Err(e)) => Err(Error::io("receiving the raw output pipe", e)),
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

fn receive_fd(stream: &impl AsFd) -> io::Result<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = rustix::net::recvmsg(
        stream,
        &mut [IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(mut fds) = message
            && let Some(fd) = fds.next()
        {
            return Ok(fd);
        }
    }
    Err(io::Error::other(if got.bytes == 0 {
        "the relay closed without a descriptor"
    } else {
        "the relay sent no descriptor"
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipe_command_refuses_what_tmux_or_sh_would_rewrite() {
        let sh = Path::new("/bin/sh");
        let socket = Path::new("/tmp/d/raw.sock");
        assert_eq!(
            pipe_command(sh, socket).as_deref(),
            Some("exec '/bin/sh' __raw-relay '/tmp/d/raw.sock'")
        );
        for bad in [
            "/tmp/a#b/raw.sock",
            "/tmp/a%Y/raw.sock",
            "/tmp/a'b",
            "rel.sock",
        ] {
            assert_eq!(pipe_command(sh, Path::new(bad)), None, "{bad}");
        }
        assert_eq!(pipe_command(Path::new("/nonexistent/relay"), socket), None);
    }
}
