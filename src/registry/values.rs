//! The values crossing the backend seam (`seam.rs`): statuses, liveness,
//! pages, close reasons, the attach lock; and what callers see of a
//! terminal ([`TerminalSnapshot`]). Plain data, no I/O. A send's values
//! are `send/`'s.

use std::fmt;
use std::ops::Range;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::vocab::RestartPolicy;
use crate::vocab::ids::{OwnerId, TerminalId};

/// Why a terminal is being closed; backends may log it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseReason {
    /// Its owner asked for it (`kill`).
    Kill,
    /// The spawn failed or was cancelled before publication.
    RolledBack,
    /// The registry was disposed.
    RegistryDisposed,
    /// It is being replaced by a rebuilt terminal with the same id.
    Replaced,
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CloseReason::Kill => "kill requested",
            CloseReason::RolledBack => "spawn rolled back",
            CloseReason::RegistryDisposed => "registry disposed",
            CloseReason::Replaced => "replaced by a rebuilt terminal",
        })
    }
}

pub use crate::vocab::ExitStatus;

/// What [`BackendTerminal::attach_lock`](super::BackendTerminal::attach_lock) returns: held until dropped.
#[must_use = "the lock is released when the guard is dropped"]
pub struct AttachLock(Option<Box<dyn std::any::Any + Send + Sync>>);

impl AttachLock {
    /// A guard holding nothing.
    pub fn none() -> Self {
        AttachLock(None)
    }

    /// A guard holding `guard` until dropped.
    pub fn holding(guard: impl std::any::Any + Send + Sync) -> Self {
        AttachLock(Some(Box::new(guard)))
    }

    /// Whether it holds anything.
    pub fn is_held(&self) -> bool {
        self.0.is_some()
    }
}

impl fmt::Debug for AttachLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AttachLock").field(&self.is_held()).finish()
    }
}

/// A terminal's status as the registry reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TerminalStatus {
    /// The program is running.
    Running,
    /// The program ended; the pane (and its output) is still there.
    Exited {
        /// How it ended.
        exit: ExitStatus,
    },
    /// The session or server is gone.
    Gone {
        /// Why, e.g. `server exited`.
        reason: String,
    },
}

impl TerminalStatus {
    /// Whether the program is running.
    pub fn is_running(&self) -> bool {
        matches!(self, TerminalStatus::Running)
    }
}

impl fmt::Display for TerminalStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TerminalStatus::Running => f.write_str("running"),
            TerminalStatus::Exited { exit } => exit.fmt(f),
            TerminalStatus::Gone { reason } => write!(f, "gone: {reason}"),
        }
    }
}

/// What callers see of one terminal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TerminalSnapshot {
    /// Its id.
    pub id: TerminalId,
    /// Its owner.
    pub owner: OwnerId,
    /// Its name, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its role, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Its backend kind.
    pub kind: String,
    /// The process id of the program the terminal runs (behind the exit
    /// handshake's wrapper, for the tmux backend), when the backend has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Its status, with exit code or signal once dead.
    pub status: TerminalStatus,
    /// Its restart policy.
    pub restart: RestartPolicy,
    /// How many times the registry recreated it.
    pub restarts: u32,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// Which way its output reaches the engine, when the backend says:
    /// `"raw"` (the pane's own bytes through its pipe) or `"control"`
    /// (tmux's `%output`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_path: Option<String>,
    /// Whether its output is kept on disk (`keep_history`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_history: bool,
    /// When it was restored after the machine restarted (milliseconds
    /// since the Unix epoch): its old history is above a marked line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_ms: Option<u64>,
    /// Why its kept history cannot be written now (a full disk), while
    /// writes fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_error: Option<String>,
}

/// What a liveness probe found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Liveness {
    /// The program is running.
    Alive,
    /// The program ended and its pane remains.
    Exited {
        /// How it ended.
        exit: ExitStatus,
    },
    /// The server answers but the session (or pane) is gone.
    SessionGone,
    /// The server itself is gone.
    ServerGone {
        /// Why, e.g. `control client reached EOF`.
        reason: String,
    },
    /// The server did not answer within the deadline; it may be alive.
    Unresponsive {
        /// How long the probe waited.
        waited: Duration,
    },
}

impl Liveness {
    /// Whether the terminal is known to be dead (exited or gone); an
    /// unresponsive terminal is not known dead.
    pub fn is_dead(&self) -> bool {
        matches!(
            self,
            Liveness::Exited { .. } | Liveness::SessionGone | Liveness::ServerGone { .. }
        )
    }

    /// The status this observation implies, or `None` when it implies none
    /// (alive or unresponsive).
    pub fn dead_status(&self) -> Option<TerminalStatus> {
        match self {
            Liveness::Exited { exit } => Some(TerminalStatus::Exited { exit: *exit }),
            Liveness::SessionGone => Some(TerminalStatus::Gone {
                reason: "session gone".to_owned(),
            }),
            Liveness::ServerGone { reason } => Some(TerminalStatus::Gone {
                reason: reason.clone(),
            }),
            Liveness::Alive | Liveness::Unresponsive { .. } => None,
        }
    }
}

/// Which page of scrollback to read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadRequest {
    /// Lines to skip, counted back from the newest line.
    pub offset: usize,
    /// How many lines to return (the backend's default page when `None`).
    pub count: Option<usize>,
}

/// One bounded page of scrollback.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReadPage {
    /// The page's lines, oldest first.
    pub lines: Vec<String>,
    /// How many lines the terminal retains in all.
    pub total_lines: usize,
    /// Which lines these are, as indexes from the oldest retained line.
    pub range: Range<usize>,
    /// Whether the page was cut short by the backend's bound.
    pub truncated: bool,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn liveness_dead_states() {
        assert!(!Liveness::Alive.is_dead());
        assert!(
            !Liveness::Unresponsive {
                waited: Duration::from_secs(1)
            }
            .is_dead()
        );
        assert!(Liveness::SessionGone.is_dead());
        assert_eq!(
            Liveness::Exited {
                exit: ExitStatus::Code(3)
            }
            .dead_status(),
            Some(TerminalStatus::Exited {
                exit: ExitStatus::Code(3)
            })
        );
    }
}

/// What a restore after a reboot prints before a terminal's program: its kept
/// history and the marked line, in a private file the new terminal prints
/// byte for byte (no output processing) and then removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restore {
    /// The file to print.
    pub replay: std::path::PathBuf,
    /// How many of its bytes are kept history (the rest is the marker).
    pub kept_bytes: u64,
}
