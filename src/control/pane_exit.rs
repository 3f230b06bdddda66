//! A pane's liveness and its program's exit status, pushed rather than polled.
//!
//! tmux sends no notification when a pane dies under `remain-on-exit on`.
//! Rather than polling `list-panes` per pane per tick, we wait on a pidfd of
//! the pane's process (readable the moment it exits, for any process, not
//! only our children), then ask tmux for the status. Where the pane's
//! output comes through its relay, the relay holds that pidfd and tells its
//! end over the link this process holds anyway
//! ([`ControlClient::watch_raw_exit`]): an idle terminal then costs one
//! descriptor here, not two. tmux marks the pane dead
//! only after the pty hits EOF and fills `pane_dead_status` only once the
//! child is reaped, so that last step polls briefly with backoff.
//!
//! The probe is `list-panes -t %P` on the exact pane: `display-message -t`
//! answers for some other pane when the target is missing.

use std::time::Duration;

use super::PaneId;
use super::client::ControlClient;
use crate::tmux::command::TmuxCommand;
use crate::tmux::process;

/// How long a pane may look dead without a status before tmux is nudged.
const NUDGE_AFTER: Duration = Duration::from_millis(30);
use crate::vocab::ExitStatus;
use crate::{Error, Result};

/// A pane as `list-panes` sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PaneState {
    /// The pane's process (the program tmux started in it).
    pub pid: Option<u32>,
    /// True once tmux considers the pane dead (pty closed).
    pub dead: bool,
    /// The exit, once tmux has reaped the process.
    pub exit: Option<ExitStatus>,
    /// The tmux server's pid.
    pub server_pid: Option<u32>,
}

/// The `list-panes -F` format [`PaneState::parse`] reads.
pub(crate) const STATE_FORMAT: &str =
    "#{pane_dead} #{pane_pid} #{pid} #{pane_dead_status} #{pane_dead_signal}";

impl PaneState {
    /// One line of `list-panes -F` [`STATE_FORMAT`]; `None` when it is not one.
    pub(crate) fn parse(line: &[u8]) -> Option<PaneState> {
        let text = std::str::from_utf8(line).ok()?;
        let mut fields = text.split(' ');
        let dead = fields.next()? == "1";
        let pid = fields.next()?.parse().ok();
        let server_pid = fields.next()?.parse().ok();
        let status = fields.next().and_then(|s| s.parse().ok());
        let signal = fields.next().and_then(|s| s.parse().ok());
        let exit = match (status, signal) {
            (_, Some(signal)) if dead => Some(ExitStatus::Signal(signal)),
            (Some(code), _) if dead => Some(ExitStatus::Code(code)),
            _ => None,
        };
        Some(PaneState {
            pid,
            dead,
            exit,
            server_pid,
        })
    }
}

/// Reads a pane's state.
///
/// # Errors
/// `COMMAND_FAILED` when the pane does not exist, or the client's errors.
pub(crate) async fn pane_state(client: &ControlClient, pane: PaneId) -> Result<PaneState> {
    let reply = client
        .command(
            &TmuxCommand::new("list-panes")
                .target(pane)
                .opt("-F", STATE_FORMAT),
        )
        .await?;
    reply
        .lines
        .first()
        .and_then(|line| PaneState::parse(line))
        .ok_or_else(|| Error::Command {
            command: format!("list-panes -t {pane}"),
            message: format!("unexpected answer {:?}", reply.text()),
        })
}

/// Waits until the pane's program has exited and tmux knows its status,
/// with all of the pane's output routed to its subscribers by then (a raw
/// pane's pipe is drained first, see [`ControlClient::drain_raw`]).
///
/// # Errors
/// `SERVER_GONE` when the connection closes first; `COMMAND_FAILED` when
/// the pane disappears (its window was killed).
pub async fn wait_pane_exit(client: &ControlClient, pane: PaneId) -> Result<ExitStatus> {
    let exit = wait_status(client, pane).await?;
    client.drain_raw(pane).await;
    Ok(exit)
}

async fn wait_status(client: &ControlClient, pane: PaneId) -> Result<ExitStatus> {
    loop {
        let state = pane_state(client, pane).await?;
        if let Some(exit) = state.exit {
            return Ok(exit);
        }
        let (false, Some(pid)) = (state.dead, state.pid) else {
            break;
        };
        // The relay's word where it gives it (no descriptor here beside
        // its link), else a pidfd of this process's own.
        if let Some(end) = client.watch_raw_exit(pane, pid).await {
            tokio::select! {
                told = end => if told.is_ok() {
                    break;
                },
                reason = client.closed() => return Err(Error::ServerGone { reason }),
            }
            // The link ended first (the pipe closed with the pane or its
            // server, or the relay was killed): tmux says which, and the
            // watch goes on over a new link, or a pidfd.
            continue;
        }
        tokio::select! {
            () = process::exited(pid) => break,
            reason = client.closed() => return Err(Error::ServerGone { reason }),
        }
    }
    // The process is gone; tmux still has to see EOF and reap it.
    let mut delay = Duration::from_millis(1);
    let mut waited = Duration::ZERO;
    loop {
        let state = pane_state(client, pane).await?;
        if let Some(exit) = state.exit {
            return Ok(exit);
        }
        if waited >= NUDGE_AFTER {
            nudge_unreaped(&state);
        }
        tokio::time::sleep(delay).await;
        waited += delay;
        delay = (delay * 2).min(Duration::from_millis(50));
    }
}

/// tmux 3.3a can lose the SIGCHLD of a pane that exits right after the
/// server started: the pane stays dead without a status until another
/// SIGCHLD makes it call waitpid. Sends one when `state` is such a pane.
pub(crate) fn nudge_unreaped(state: &PaneState) {
    if state.dead
        && state.exit.is_none()
        && let Some(server) = state.server_pid
        && process::looks_like_tmux(server)
    {
        let _ = process::signal(server, rustix::process::Signal::CHILD);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_list_panes_states() {
        let cases: &[(&[u8], Option<PaneState>)] = &[
            (
                b"0 42 7  ",
                Some(PaneState {
                    pid: Some(42),
                    dead: false,
                    exit: None,
                    server_pid: Some(7),
                }),
            ),
            (
                b"1 42 7 3 ",
                Some(PaneState {
                    pid: Some(42),
                    dead: true,
                    exit: Some(ExitStatus::Code(3)),
                    server_pid: Some(7),
                }),
            ),
            (
                b"1 42 7  9",
                Some(PaneState {
                    pid: Some(42),
                    dead: true,
                    exit: Some(ExitStatus::Signal(9)),
                    server_pid: Some(7),
                }),
            ),
            // Dead but not yet reaped: no status yet.
            (
                b"1 42 7  ",
                Some(PaneState {
                    pid: Some(42),
                    dead: true,
                    exit: None,
                    server_pid: Some(7),
                }),
            ),
            (b"", None),
        ];
        for (line, want) in cases {
            assert_eq!(
                PaneState::parse(line),
                *want,
                "{:?}",
                String::from_utf8_lossy(line)
            );
        }
    }

    #[test]
    fn shell_status_follows_the_shell_convention() {
        assert_eq!(ExitStatus::Code(3).shell_status(), 3);
        assert_eq!(ExitStatus::Signal(15).shell_status(), 143);
    }
}
