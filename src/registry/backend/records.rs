//! What a terminal's record names, read back without attaching: its
//! server directory, its server and pane processes (each with the start
//! time recorded when the pid was learnt), the cheap status check and the
//! retirement of what may remain.

use std::sync::Arc;

use super::{SESSION, TmuxBackend, reap};
use crate::Result;
use crate::registry::persist::TerminalRecord;
use crate::registry::seam::{ExitStatus, RecordCheck, TerminalStatus};
use crate::tmux::command::TmuxCommand;
use crate::tmux::{ProcessId, ServerHandle, process};

/// The process a record's locator names under `pid_key`, with the start
/// time recorded under `start_key` (none in records written before start
/// times were recorded: then the pid alone, as `kill(2)` would).
pub(super) fn recorded_process(
    record: &TerminalRecord,
    pid_key: &str,
    start_key: &str,
) -> ProcessId {
    let field = |key: &str| record.locator.get(key).and_then(serde_json::Value::as_u64);
    ProcessId {
        pid: field(pid_key)
            .and_then(|pid| u32::try_from(pid).ok())
            .unwrap_or(0),
        start_time: field(start_key),
    }
}

/// The pane process of an adopted terminal, given the pid tmux reports
/// for its pane and whether that pane is dead.
///
/// The record's process when tmux names the same pid: with the start time
/// recorded when the pid was learnt, never re-read now (a dead pane's pid
/// may belong to a stranger by now, whose start time a re-read would
/// trust); a mismatch then makes every later check treat it as gone. A
/// live pane the record does not name (respawned in place since the
/// record was written) is read now: tmux has not reaped it, so its pid
/// cannot have been reused. Anything else is unknown (pid 0), which
/// nothing signals.
pub(super) fn adopted_pane(
    record: &TerminalRecord,
    reported: Option<u32>,
    dead: bool,
) -> ProcessId {
    let recorded = recorded_process(record, "pane_pid", "pane_start");
    match reported {
        Some(pid) if pid == recorded.pid && recorded.start_time.is_some() => recorded,
        Some(pid) if !dead => Some(ProcessId::now(pid))
            .filter(|process| process.start_time.is_some())
            .unwrap_or_default(),
        _ => ProcessId::default(),
    }
}

/// The server directory a record names, if any.
pub(super) fn recorded_dir(record: &TerminalRecord) -> Option<&str> {
    record
        .locator
        .get("dir")
        .and_then(|dir| dir.as_str())
        .filter(|dir| !dir.is_empty())
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
        let Some(dir) = recorded_dir(record) else {
            return gone("the record names no server directory");
        };
        let handle = ServerHandle::open(Arc::clone(&self.tmux), dir, SESSION);
        // The recorded server process alive (pid and start time) proves the
        // server without touching its socket: a `/proc` read instead of a
        // connect that wakes the server, which over 300 terminals was most
        // of `list`'s time. Otherwise the socket tells.
        let server = recorded_process(record, "server_pid", "server_start");
        if !(server.start_time.is_some() && process::is_alive(server)) {
            match reap::occupant(handle.socket()) {
                reap::Occupant::Nothing => return gone("server gone"),
                // Unknown is not dead: say running, let a probe tell.
                reap::Occupant::Unknown(_) | reap::Occupant::Listening => {}
            }
        }
        let pane = recorded_process(record, "pane_pid", "pane_start");
        let running = RecordCheck {
            status: TerminalStatus::Running,
            pid: Some(pane.pid).filter(|&pid| pid != 0),
        };
        if pane.start_time.is_some() && process::is_alive(pane) {
            return running;
        }
        let query = TmuxCommand::new("list-panes")
            .opt("-t", format!("{}:", handle.session()))
            .opt(
                "-F",
                "#{pane_dead} #{pane_pid} #{pane_dead_status} #{pane_dead_signal}",
            );
        let Ok(text) = tokio::time::timeout(self.config.probe_timeout, handle.run(&query)).await
        else {
            return running;
        };
        let Ok(text) = text else {
            return running;
        };
        let mut fields = text.lines().next().unwrap_or_default().split(' ');
        let dead = fields.next() == Some("1");
        let pid = fields.next().and_then(|pid| pid.parse().ok());
        let code = fields.next().and_then(|code| code.parse().ok());
        let signal = fields.next().and_then(|signal| signal.parse().ok());
        let exit = match (code, signal) {
            (_, Some(signal)) => Some(ExitStatus::Signal(signal)),
            (Some(code), _) => Some(ExitStatus::Code(code)),
            _ => None,
        };
        match exit {
            Some(exit) if dead => RecordCheck {
                status: TerminalStatus::Exited { exit },
                pid,
            },
            _ => RecordCheck {
                status: TerminalStatus::Running,
                pid,
            },
        }
    }

    /// The kill path on what a record names, without attaching: guarded by
    /// the recorded pane process's start time.
    pub(super) async fn retire_record(&self, record: &TerminalRecord) -> Result<()> {
        let Some(dir) = recorded_dir(record) else {
            return Ok(());
        };
        let mut handle = ServerHandle::open(Arc::clone(&self.tmux), dir, SESSION);
        let server = recorded_process(record, "server_pid", "server_start");
        if server.pid != 0 && server.start_time.is_some() && process::is_alive(server) {
            handle.set_pid(server.pid);
        }
        let pane = recorded_process(record, "pane_pid", "pane_start");
        let pane = (pane.pid != 0 && pane.start_time.is_some()).then_some(pane);
        handle.kill_with(pane, None).await
    }
}
