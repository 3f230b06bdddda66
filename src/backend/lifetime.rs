//! Ending, probing and respawning a tmux terminal: the kill path, the
//! detach that leaves its server running, the liveness probe, and
//! `respawn-pane` with the terminal's own spec.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tracing::debug;

use super::link::ServerLink;
use crate::control::client::OutputPath;
use crate::control::pane_exit::{pane_state, wait_pane_exit};
use crate::control::subscribe::SubscribeOptions;
use crate::registry::seam::{CloseReason, Liveness, TerminalStatus};
use crate::tmux::ProcessId;
use crate::tmux::command::TmuxCommand;
use crate::tmux::options::respawn_commands;
use crate::{Error, Result};

/// How long `close` waits for the control client to see the server go.
const CLIENT_CLOSE_WAIT: Duration = Duration::from_secs(2);

/// Kills the pane's process tree and the server, removes the directory:
/// the kill path ([`ServerHandle::kill_with`]), asking over the control
/// connection while it is up (no tmux process to spawn), and waiting for
/// the client's EOF alongside.
pub(super) async fn close(shared: &ServerLink, reason: CloseReason) -> Result<()> {
    let mut server = shared.server.lock().await;
    if shared.closed.load(Ordering::Acquire) {
        return Ok(());
    }
    debug!(terminal = %shared.id, %reason, "closing");
    if let Some(send) = shared.lock().active_send.take() {
        send.cancel();
    }
    let pane = shared.lock().pane_process;
    let request = shared.client.kill_request();
    let client_closed = tokio::time::timeout(CLIENT_CLOSE_WAIT, shared.client.closed());
    let (killed, _) = tokio::join!(server.kill_with(pane, request), client_closed);
    killed?;
    shared.stop.cancel();
    shared.tasks.wait().await;
    shared.set_status(TerminalStatus::Gone {
        reason: format!("closed: {reason}"),
    });
    shared.closed.store(true, Ordering::Release);
    Ok(())
}

/// Lets go of the terminal without touching the server: the watcher stops
/// first (so the detach does not read as the server's death), then the
/// control client detaches; resolves when both are done.
pub(super) async fn shutdown(shared: &ServerLink) {
    // Serialized with `close`: a close in flight finishes first.
    let _server = shared.server.lock().await;
    if let Some(send) = shared.lock().active_send.take() {
        send.cancel();
    }
    shared.stop.cancel();
    shared.tasks.wait().await;
    let reason = shared.client.detach().await;
    debug!(terminal = %shared.id, %reason, "shut down; the server keeps running");
}

/// The liveness probe: control-client EOF, then `list-panes` on the exact
/// pane under a deadline.
pub(super) async fn probe(shared: &ServerLink) -> Result<Liveness> {
    if shared.closed.load(Ordering::Acquire) {
        return Ok(Liveness::ServerGone {
            reason: "closed".to_owned(),
        });
    }
    let observed = probe_once(shared).await?;
    if let Some(dead) = observed.dead_status() {
        shared.set_status(dead);
    } else if observed == Liveness::Alive {
        shared.set_status(TerminalStatus::Running);
    }
    Ok(observed)
}

async fn probe_once(shared: &ServerLink) -> Result<Liveness> {
    if let Some(reason) = shared.client.closed_reason() {
        return Ok(Liveness::ServerGone { reason });
    }
    let waited = shared.config.probe_timeout;
    // What a failed (or late) pane query says about the terminal.
    let failed = |error: Option<Error>| match error {
        None | Some(Error::Unresponsive { .. }) => Ok(Liveness::Unresponsive { waited }),
        Some(Error::ServerGone { reason }) => Ok(Liveness::ServerGone { reason }),
        Some(Error::Command { .. }) => Ok(Liveness::SessionGone),
        Some(error) => Err(error),
    };
    let state = match tokio::time::timeout(waited, pane_state(&shared.client, shared.pane)).await {
        Ok(Ok(state)) => state,
        Ok(Err(error)) => return failed(Some(error)),
        Err(_) => return failed(None),
    };
    if let Some(exit) = state.exit {
        return Ok(Liveness::Exited { exit });
    }
    if state.dead {
        // Dead but not reaped yet (tmux 3.3a can lose the SIGCHLD):
        // wait_pane_exit nudges the server until the status shows.
        return match tokio::time::timeout(waited, wait_pane_exit(&shared.client, shared.pane)).await
        {
            Ok(Ok(exit)) => Ok(Liveness::Exited { exit }),
            Ok(Err(error)) => failed(Some(error)),
            Err(_) => failed(None),
        };
    }
    Ok(Liveness::Alive)
}

/// `respawn-pane -k` with the original spec, then a fresh subscription
/// (tmux does not reset a control client's pane offsets on respawn).
pub(super) async fn respawn(shared: &ServerLink) -> Result<()> {
    if shared.closed.load(Ordering::Acquire) {
        return Err(Error::ServerGone {
            reason: "terminal closed".to_owned(),
        });
    }
    if let Some(reason) = shared.client.closed_reason() {
        return Err(Error::ServerGone { reason });
    }
    let opts = super::config::server_options(&shared.config, &shared.id, &shared.spec)?;
    let (command, drain) = respawn_commands(&opts, shared.pane)?;
    if shared.client.output_path(shared.pane) == OutputPath::Control {
        realign_offsets(shared).await?;
    }
    // tmux keeps a pane's pipe across `respawn-pane` (spawn.c closes only
    // the pty), and the drain's `pipe-pane -o` toggles an open pipe off:
    // on the raw path that closed the relay, so the restarted program's
    // output never reached the stream (a viewer of an `always`
    // terminal got its repaint and then nothing). The drain is only put
    // back where no pipe is left.
    let drain = match drain {
        Some(drain) if !piped(shared).await => Some(drain),
        _ => None,
    };
    let drained = async {
        match &drain {
            Some(drain) => shared.command(drain).await.map(drop),
            None => Ok(()),
        }
    };
    let (respawned, drained) = tokio::join!(shared.command(&command), drained);
    if let Err(error) = drained {
        debug!(%error, "re-arming the drain pipe after respawn");
    }
    match respawned {
        Ok(_) => {}
        Err(Error::Command { message, .. }) => {
            // No pane left to respawn in: the registry rebuilds instead.
            return Err(Error::ServerGone {
                reason: format!("respawn failed: {message}"),
            });
        }
        Err(error) => return Err(error),
    }
    let state = pane_state(&shared.client, shared.pane).await?;
    if let Some(pid) = state.pid {
        crate::tmux::exit_handshake::started(pid).await;
        shared.set_pane_process(ProcessId::now(pid).known());
    }
    let stream = shared.client.subscribe_pane(
        shared.pane,
        SubscribeOptions {
            snapshot_first: true,
            ..SubscribeOptions::default()
        },
    );
    shared.set_status(TerminalStatus::Running);
    shared
        .restream
        .send(stream)
        .await
        .map_err(|_| Error::ServerGone {
            reason: "terminal watcher stopped".to_owned(),
        })
}

/// Whether tmux has a pipe open on the pane (`#{pane_pipe}`): the raw
/// relay's or the drain's. An unanswered query counts as piped: a second
/// `pipe-pane -o` would close the one that is there.
async fn piped(shared: &ServerLink) -> bool {
    let command = TmuxCommand::new("display-message")
        .flag("-p")
        .target(shared.pane)
        .arg("#{pane_pipe}");
    !shared
        .command(&command)
        .await
        .is_ok_and(|reply| reply.text().trim() == "0")
}

/// Brings our control client's offset into the dead pane's output back to
/// the pane's own before a `respawn-pane` (docs/tmux-quirks.md, "A
/// respawn after a lost exit tail"): tmux 3.3a drops the blocks of a dying
/// pane it had not yet written to a control client without moving that
/// client's offset, and keeps every offset across the respawn, so its
/// parser then skipped as many of the new program's first bytes (a
/// viewer's repaint showed `n-1` for `run-1`) or, when the new program's
/// first read was shorter than that, read past its buffer and crashed the
/// server. Turning `%output` off and on copies the pane's offset into the
/// client's (`control_set_pane_on`); the pane is dead, so nothing is
/// skipped by it.
async fn realign_offsets(shared: &ServerLink) -> Result<()> {
    for switch in ["off", "on"] {
        let command =
            TmuxCommand::new("refresh-client").opt("-A", format!("{}:{switch}", shared.pane));
        shared.command(&command).await?;
    }
    Ok(())
}
