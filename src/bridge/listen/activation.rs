//! systemd's side of a service: the listening socket it passes
//! (`LISTEN_FDS`, socket activation, TCP or Unix) and the notifications it
//! waits for (`NOTIFY_SOCKET`: `READY=1` once serving, `STOPPING=1` when
//! draining, `WATCHDOG=1` every half `WATCHDOG_USEC`). Also what
//! `systemd-socket-activate` and any manager speaking the same protocol
//! use. Nothing here accepts or serves: it hands a [`Listener`] over and
//! writes datagrams.

use std::io;
use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::serve_options::Listener;
use crate::{Error, Result};

/// The listening socket systemd passed, if `LISTEN_FDS` (for this
/// process: `LISTEN_PID`) names one; the variables are removed so the
/// terminals' programs never see them. One socket only: a unit that passes
/// more is refused rather than half served.
///
/// Call it before anything else reads the environment from another
/// thread (`serve` does it first).
///
/// # Errors
/// `INVALID_INPUT` for more than one socket, or one that is not a
/// listening TCP or Unix stream socket; `IO` when it cannot be made
/// non-blocking.
pub fn inherited() -> Result<Option<Listener>> {
    let mut fds = listenfd::ListenFd::from_env();
    match fds.len() {
        0 => return Ok(None),
        1 => {}
        n => {
            return Err(Error::InvalidInput(format!(
                "LISTEN_FDS passes {n} sockets: serve listens on one (one ListenStream=)"
            )));
        }
    }
    let failed = |e: io::Error| Error::io("taking the socket systemd passed (LISTEN_FDS)", e);
    // Each take leaves a socket of another kind where it was.
    if let Ok(Some(listener)) = fds.take_unix_listener(0) {
        listener.set_nonblocking(true).map_err(failed)?;
        let listener = tokio::net::UnixListener::from_std(listener).map_err(failed)?;
        return Ok(Some(Listener::Unix(listener)));
    }
    match fds.take_tcp_listener(0) {
        Ok(Some(listener)) => {
            listener.set_nonblocking(true).map_err(failed)?;
            let listener = tokio::net::TcpListener::from_std(listener).map_err(failed)?;
            Ok(Some(Listener::Tcp(listener)))
        }
        Ok(None) => Ok(None),
        Err(e) => Err(Error::InvalidInput(format!(
            "the socket systemd passed (LISTEN_FDS) is neither a TCP nor a Unix stream \
             socket: {e}"
        ))),
    }
}

/// Where the service manager listens for notifications
/// (`NOTIFY_SOCKET`), if it does.
#[derive(Debug, Clone)]
pub struct Notifier {
    address: std::os::unix::net::SocketAddr,
}

impl Notifier {
    /// The manager's socket from `NOTIFY_SOCKET` (a path, or `@name` for
    /// an abstract one); `None` when unset or unusable.
    pub fn from_env() -> Option<Notifier> {
        let value = std::env::var_os("NOTIFY_SOCKET")?;
        let value = value.to_str()?;
        let address = match value.strip_prefix('@') {
            Some(name) => {
                use std::os::linux::net::SocketAddrExt;
                std::os::unix::net::SocketAddr::from_abstract_name(name).ok()?
            }
            None if value.starts_with('/') => {
                std::os::unix::net::SocketAddr::from_pathname(value).ok()?
            }
            None => return None,
        };
        Some(Notifier { address })
    }

    /// Sends one notification (`READY=1`, `STATUS=...`, newline-separated).
    ///
    /// # Errors
    /// `IO` when the datagram cannot be sent.
    pub fn notify(&self, state: &str) -> Result<()> {
        let failed = |e| Error::io("notifying the service manager (NOTIFY_SOCKET)", e);
        let socket = UnixDatagram::unbound().map_err(failed)?;
        socket
            .send_to_addr(state.as_bytes(), &self.address)
            .map_err(failed)?;
        Ok(())
    }

    /// Pings the watchdog every half of `WATCHDOG_USEC` (when set, and
    /// meant for this process: `WATCHDOG_PID`) until `stop` is cancelled,
    /// from a task of the runtime serving requests: a runtime that stops
    /// running tasks stops the pings, and the manager restarts serve.
    pub fn keep_watchdog(&self, stop: CancellationToken) {
        let Some(interval) = watchdog_interval() else {
            return;
        };
        let notifier = self.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    _ = ticks.tick() => {
                        if let Err(error) = notifier.notify("WATCHDOG=1") {
                            tracing::warn!(%error, "pinging the watchdog");
                        }
                    }
                }
            }
        });
    }
}

/// Half the manager's watchdog timeout, if it set one for this process.
fn watchdog_interval() -> Option<Duration> {
    if let Some(pid) = std::env::var_os("WATCHDOG_PID")
        && pid.to_str()?.parse::<u32>().ok()? != std::process::id()
    {
        return None;
    }
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    (usec > 0).then(|| Duration::from_micros(usec / 2))
}
