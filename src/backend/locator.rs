//! [`TmuxLocator`]: what a tmux terminal's record says about where its
//! server is, typed; the one place the record's `locator` JSON is written
//! ([`TmuxLocator::to_value`]) and read ([`TmuxLocator::of`]).
//!
//! The registry core keeps the locator opaque (the stub backend has its
//! own); nothing else in this backend reads it by key.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tracing::warn;

use crate::statedir::TerminalRecord;
use crate::tmux::ProcessId;

/// Where a tmux terminal's server is, as its record names it.
///
/// A process here is always known by its start time (so a recycled pid is
/// never taken for it); one the record does not name that way (pid 0, or
/// no start time in records written before start times were recorded) is
/// `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Wire", into = "Wire")]
pub struct TmuxLocator {
    /// The server's private directory; `None` when not known.
    pub dir: Option<PathBuf>,
    /// The server's socket (inside `dir`); empty when not known.
    pub socket: PathBuf,
    /// The session (always `main`).
    pub session: String,
    /// The pane (`%0`).
    pub pane: String,
    /// The tmux server process.
    pub server: Option<ProcessId>,
    /// The pane's program.
    pub pane_process: Option<ProcessId>,
}

/// The JSON keys every engine since start times were recorded writes and
/// reads (`"server_pid": 0` and `"server_start": null` for "unknown"), so
/// an older engine reads a newer record and the other way round. Every key
/// is optional: a missing one reads as unknown, as the old readers did.
#[derive(Default, Serialize, Deserialize)]
#[serde(default)]
struct Wire {
    dir: String,
    socket: String,
    session: String,
    pane: String,
    server_pid: u32,
    server_start: Option<u64>,
    pane_pid: u32,
    pane_start: Option<u64>,
}

fn known(pid: u32, start_time: Option<u64>) -> Option<ProcessId> {
    ProcessId { pid, start_time }.known()
}

impl From<Wire> for TmuxLocator {
    fn from(wire: Wire) -> Self {
        TmuxLocator {
            dir: Some(PathBuf::from(wire.dir)).filter(|dir| !dir.as_os_str().is_empty()),
            socket: wire.socket.into(),
            session: wire.session,
            pane: wire.pane,
            server: known(wire.server_pid, wire.server_start),
            pane_process: known(wire.pane_pid, wire.pane_start),
        }
    }
}

impl From<TmuxLocator> for Wire {
    fn from(locator: TmuxLocator) -> Self {
        let (server_pid, server_start) = split(locator.server);
        let (pane_pid, pane_start) = split(locator.pane_process);
        Wire {
            dir: locator
                .dir
                .map(|dir| dir.display().to_string())
                .unwrap_or_default(),
            socket: locator.socket.display().to_string(),
            session: locator.session,
            pane: locator.pane,
            server_pid,
            server_start,
            pane_pid,
            pane_start,
        }
    }
}

fn split(process: Option<ProcessId>) -> (u32, Option<u64>) {
    process.map_or((0, None), |process| (process.pid, process.start_time))
}

impl TmuxLocator {
    /// What `record` names. A locator that is not an object of the
    /// expected keys names nothing (logged): the record then reads as
    /// gone, as one without a directory always has.
    pub fn of(record: &TerminalRecord) -> TmuxLocator {
        TmuxLocator::deserialize(&record.locator).unwrap_or_else(|error| {
            warn!(terminal = %record.id, %error, "unreadable locator");
            TmuxLocator::default()
        })
    }

    /// The JSON persisted in the record.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a locator is plain JSON")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_processes_are_none_and_written_as_before() {
        let cases = [
            serde_json::json!({ "dir": "/d", "server_pid": 0, "server_start": null }),
            // Written before start times were recorded: the pid alone is
            // not trusted.
            serde_json::json!({ "dir": "/d", "server_pid": 7, "pane_pid": 8 }),
        ];
        for value in cases {
            let locator = TmuxLocator::deserialize(&value).expect("reads");
            assert_eq!(locator.dir, Some(PathBuf::from("/d")), "{value}");
            let processes = (locator.server, locator.pane_process);
            assert_eq!(processes, (None, None), "{value}");
        }
        let written = TmuxLocator::default().to_value();
        assert_eq!(written["dir"], "");
        assert_eq!(
            (&written["server_pid"], &written["pane_pid"]),
            (&0.into(), &0.into())
        );
        assert!(written["server_start"].is_null() && written["pane_start"].is_null());
    }
}
