//! What a terminal's record names, read back without attaching: its
//! server directory, its server and pane processes (each with the start
//! time recorded when the pid was learnt), the cheap status check and the
//! retirement of what may remain.

use std::sync::Arc;

use super::locator::TmuxLocator;
use super::{SESSION, TmuxBackend, reap};
use crate::Result;
use crate::control::pane_exit::{PaneState, STATE_FORMAT};
use crate::registry::persist::TerminalRecord;
use crate::registry::seam::{RecordCheck, TerminalStatus};
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
            pid: pane.map(|pane| pane.pid),
        };
        if pane.is_some_and(process::is_alive) {
            return running;
        }
        let query = TmuxCommand::new("list-panes")
            .opt("-t", format!("{}:", handle.session()))
            .opt("-F", STATE_FORMAT);
        let Ok(Ok(text)) =
            tokio::time::timeout(self.config.probe_timeout, handle.run(&query)).await
        else {
            return running;
        };
        match text
            .lines()
            .next()
            .and_then(|line| PaneState::parse(line.as_bytes()))
        {
            Some(PaneState {
                exit: Some(exit),
                pid,
                ..
            }) => RecordCheck {
                status: TerminalStatus::Exited { exit },
                pid,
            },
            state => RecordCheck {
                status: TerminalStatus::Running,
                pid: state.and_then(|state| state.pid),
            },
        }
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
