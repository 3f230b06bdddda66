//! `tmux-engine run`: a command in a private tmux server, its pane output
//! streamed to stdout through control mode, its exit status passed on.
//!
//! The session is created by the control client itself
//! (`tmux -C new-session ...`), with the pane subscribed before tmux writes a
//! byte, so the program's first output is not lost. Delivery is lossless: a
//! slow stdout slows tmux's reading of the pane (the program blocks) instead
//! of dropping bytes, which is what a pipe user expects.

use std::ffi::OsString;
use std::sync::Arc;

use tokio::io::AsyncWriteExt;

use crate::control::PaneId;
use crate::control::client::{ClientOptions, ControlClient, Delivery, PaneEvent, PaneStream};
use crate::control::exit::wait_pane_exit;
use crate::control::subscribe::SubscribeOptions;
use crate::terminal::Terminal;
use crate::tmux::{ServerOptions, Size, Tmux};
use crate::{Error, Result};

/// What `run` was asked to do.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Pane size, columns × rows.
    pub size: (u16, u16),
    /// The program and its arguments (executed directly, no shell).
    pub command: Vec<OsString>,
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunEnd {
    /// The program ended: its shell-style status (128 + N for signal N).
    Exited(i32),
    /// Ctrl-C or SIGTERM stopped the run; the server was removed.
    Interrupted(i32),
}

/// Runs the command, streaming its pane output to `out`.
///
/// # Errors
/// tmux discovery and startup errors; `SERVER_GONE` when tmux dies before
/// the program ends; `IO` when `out` fails.
pub async fn run(opts: RunOptions, mut out: impl tokio::io::AsyncWrite + Unpin) -> Result<RunEnd> {
    if opts.command.is_empty() {
        return Err(Error::InvalidInput("run needs a command".into()));
    }
    let tmux = Arc::new(Tmux::discover()?);
    let server_opts = ServerOptions {
        size: Size {
            cols: opts.size.0,
            rows: opts.size.1,
        },
        command: opts.command,
        ..ServerOptions::default()
    };
    let client_opts = ClientOptions {
        // pause-after would let tmux drop output; lossless needs it off.
        pause_after: None,
        pane_pause: false,
        ..ClientOptions::default()
    };
    let lossless = SubscribeOptions {
        delivery: Delivery::Lossless,
        snapshot_first: false,
    };
    let (terminal, mut stream) = Terminal::start(tmux, server_opts, client_opts, lossless).await?;
    let result = pump(terminal.client(), terminal.pane(), &mut stream, &mut out).await;
    drop(stream);
    terminal.kill().await?;
    result
}

async fn pump(
    client: &ControlClient,
    pane: PaneId,
    stream: &mut PaneStream,
    out: &mut (impl tokio::io::AsyncWrite + Unpin),
) -> Result<RunEnd> {
    let exit = wait_pane_exit(client, pane);
    tokio::pin!(exit);
    let interrupt = interrupted();
    tokio::pin!(interrupt);
    loop {
        tokio::select! {
            event = stream.recv() => match event {
                Some(event) => {
                    write_event(out, event).await?;
                    // Flush only when nothing more is queued: fewer syscalls
                    // under load, no delay when idle.
                    while let Some(event) = stream.try_recv() {
                        write_event(out, event).await?;
                    }
                    out.flush().await.map_err(|e| Error::io("writing stdout", e))?;
                }
                None => {
                    return Err(Error::ServerGone {
                        reason: stream.close_reason().unwrap_or_else(|| "stream ended".into()),
                    });
                }
            },
            status = &mut exit => {
                let status = status?;
                // Output read before tmux saw the pane die is already queued.
                while let Some(event) = stream.try_recv() {
                    write_event(out, event).await?;
                }
                out.flush().await.map_err(|e| Error::io("writing stdout", e))?;
                return Ok(RunEnd::Exited(status.shell_status()));
            }
            signal = &mut interrupt => return Ok(RunEnd::Interrupted(128 + signal)),
        }
    }
}

async fn write_event(out: &mut (impl tokio::io::AsyncWrite + Unpin), event: PaneEvent) -> Result<()> {
    let written = match event {
        PaneEvent::Output(bytes) => out.write_all(&bytes).await,
        // Lossless delivery never skips, but a redraw is the honest fallback.
        PaneEvent::Resync(snapshot) => out.write_all(&snapshot.to_ansi()).await,
    };
    written.map_err(|e| Error::io("writing stdout", e))
}

/// Resolves with the signal number on Ctrl-C (SIGINT) or SIGTERM.
async fn interrupted() -> i32 {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => 2,
        _ = term.recv() => 15,
    }
}
