//! What a terminal's record names, read back without attaching: its
//! server directory, its server and pane processes (each with the start
//! time recorded when the pid was learnt), the cheap status check and the
//! retirement of what may remain.

use std::sync::Arc;

use super::locator::TmuxLocator;
use super::{SESSION, TmuxBackend, reap};
use crate::Result;
use crate::control::pane_exit::{PaneState, STATE_FORMAT};
use crate::registry::seam::{RecordCheck, TerminalStatus};
use crate::statedir::TerminalRecord;
use crate::tmux::command::TmuxCommand;
use crate::tmux::{ProcessId, ServerHandle, process};

/// The pane process of an adopted terminal, given the pid tmux reports
/// for its pane and whether that pane is dead.
///
/// The recorded process when tmux names the same pid: with the start time
/// recorded when the pid was learnt, never re-read now (a dead pane's pid
/// may belong to a stranger by now, whose start time a re-read would
/// trust); a mismatch then makes every later check treat it as gone. A
/// live pane the record does not name (respawned in place since the
/// record was written) is read now: tmux has not reaped it, so its pid
/// cannot have been reused. Anything else is unknown, which nothing
/// signals.
pub(super) fn adopted_pane(
    recorded: Option<ProcessId>,
    reported: Option<u32>,
    dead: bool,
) -> Option<ProcessId> {
    match (recorded, reported) {
        (Some(recorded), Some(pid)) if pid == recorded.pid => Some(recorded),
        (_, Some(pid)) if !dead => ProcessId::now(pid).known(),
        _ => None,
    }
}

impl TmuxBackend {
    /// The cheap status of a recorded terminal: the server process's pid
    /// and start time (else a socket connect), the pane process's, and a one-shot `list-panes` only when
    /// that process is gone while the server listens (to read its exit).
    pub(super) async fn check_record(&self, record: &TerminalRecord) -> RecordCheck {
        let gone = |reason: &str| RecordCheck {
            status: TerminalStatus::Gone {
                reason: reason.to_owned(),
            },
            pid: None,
        };
        let locator = TmuxLocator::of(record);
        let Some(dir) = &locator.dir else {
            return gone("the record names no server directory");
        };
        let handle = ServerHandle::open(Arc::clone(&self.tmux), dir, SESSION);
        // The recorded server process alive (pid and start time) proves the
        // server without touching its socket: a `/proc` read instead of a
        // connect that wakes the server, which over 300 terminals was most
        // of `list`'s time. Otherwise the socket tells.
        if !locator.server.is_some_and(process::is_alive) {
            match reap::occupant(handle.socket()) {
                reap::Occupant::Nothing => return gone("server gone"),
                // Unknown is not dead: say running, let a probe tell.
                reap::Occupant::Unknown(_) | reap::Occupant::Listening => {}
            }
        }
        let pane = locator.pane_process;
        let running = RecordCheck {
            status: TerminalStatus::Running,
            // The program's, as a live terminal's `pid` (not the exit
            // handshake's wrapper's).
            pid: pane
                .map(|pane| crate::tmux::exit_handshake::program_pid(pane.pid).unwrap_or(pane.pid)),
        };
        // A released wrapper has just ended: tmux may not have taken its
        // status in yet, so the query is repeated (briefly) until it has.
        let released = pane.is_some_and(process::is_alive);
        if released && !self.release_detached_exit(&handle, pane).await {
            return running;
        }
        let deadline = tokio::time::Instant::now() + self.config.probe_timeout;
        let mut pause = std::time::Duration::from_millis(2);
        loop {
            match self.pane_state_of(&handle).await {
                Some(PaneState {
                    exit: Some(exit),
                    pid,
                    ..
                }) => {
                    return RecordCheck {
                        status: TerminalStatus::Exited { exit },
                        pid,
                    };
                }
                state if released && tokio::time::Instant::now() + pause < deadline => {
                    // Dead without a status: tmux has not reaped the wrapper.
                    if let Some(state) = &state {
                        crate::control::pane_exit::nudge_unreaped(state);
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(std::time::Duration::from_millis(50));
                }
                None => return running,
                Some(state) => {
                    return RecordCheck {
                        status: TerminalStatus::Running,
                        pid: state.pid,
                    };
                }
            }
        }
    }

    /// The pane's state by a one-shot `list-panes`; `None` when the server
    /// does not answer in time or the answer does not parse.
    async fn pane_state_of(&self, handle: &ServerHandle) -> Option<PaneState> {
        let query = TmuxCommand::new("list-panes")
            .opt("-t", format!("{}:", handle.session()))
            .opt("-F", STATE_FORMAT);
        let text = tokio::time::timeout(self.config.probe_timeout, handle.run(&query))
            .await
            .ok()?
            .ok()?;
        PaneState::parse(text.lines().next()?.as_bytes())
    }

    /// A program that ended while no engine was attached printed its exit
    /// marker to nobody: its wrapper (`tmux::exit_handshake`) waits for an
    /// acknowledgement that only an attaching engine would give, and the
    /// terminal would look running. With no control client attached (one
    /// that is would acknowledge once it has the last bytes), lets it go
    /// and waits for the pane's process to end, so the exit shows now.
    /// tmux has the program's output by then: the pane's side of the pty
    /// stayed open while the wrapper waited. Whether the process ended.
    async fn release_detached_exit(&self, handle: &ServerHandle, pane: Option<ProcessId>) -> bool {
        use crate::tmux::exit_handshake;
        let Some(pane) = pane else { return false };
        if exit_handshake::wrapped(pane.pid) != exit_handshake::Wrapped::Between {
            return false;
        }
        let clients = TmuxCommand::new("list-clients").opt("-F", "#{client_name}");
        match tokio::time::timeout(self.config.probe_timeout, handle.run(&clients)).await {
            Ok(Ok(text)) if text.trim().is_empty() => {}
            _ => return false,
        }
        // The wrapper opens its fifo a moment after its program ended:
        // retried while it lives without a child, up to the deadline.
        let deadline = tokio::time::Instant::now() + self.config.probe_timeout;
        let mut pause = std::time::Duration::from_millis(2);
        while !exit_handshake::acknowledge(handle.dir()) {
            if exit_handshake::wrapped(pane.pid) != exit_handshake::Wrapped::Between
                || tokio::time::Instant::now() + pause > deadline
            {
                return false;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(std::time::Duration::from_millis(50));
        }
        // Its end pushed (a pidfd), not polled.
        tokio::time::timeout_at(deadline, process::exited(pane))
            .await
            .is_ok()
    }

    /// The kill path on what a record names, without attaching: guarded by
    /// the recorded pane process's start time.
    pub(super) async fn retire_record(&self, record: &TerminalRecord) -> Result<()> {
        let locator = TmuxLocator::of(record);
        let Some(dir) = &locator.dir else {
            return Ok(());
        };
        let mut handle = ServerHandle::open(Arc::clone(&self.tmux), dir, SESSION);
        if let Some(server) = locator.server.filter(|&server| process::is_alive(server)) {
            handle.set_pid(server.pid);
        }
        handle.kill_with(locator.pane_process, None).await
    }
}
