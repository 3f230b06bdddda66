//! Whether this process holds a terminal, and what is known of it: one
//! [`Presence`] per entry, changed only through the methods here, read by
//! [`Presence::status`] (what `list` and `show` report).

use std::sync::Arc;

use super::seam::{BackendTerminal, RecordCheck, TerminalStatus};

/// Why adoption found nothing: the terminal's server or session is gone.
const NOT_RUNNING: &str = "not running when adopted";

/// A published terminal's presence in this process.
pub(crate) enum Presence {
    /// Recorded, not attached by this process, not proven gone: adopted
    /// when a command needs it.
    Unadopted {
        /// The backend's cheap check, when it made one.
        checked: Option<RecordCheck>,
        /// Why the last adoption failed without proof of death (a timeout:
        /// unresponsive is not dead); reported as `gone` until a command
        /// adopts it.
        failure: String,
    },
    /// Attached here.
    Live {
        terminal: Arc<dyn BackendTerminal>,
        /// Death a probe saw while the backend still said running.
        seen_dead: Option<TerminalStatus>,
    },
    /// Proven gone (or gone when adopted): recreatable by its policy.
    Gone { reason: String },
}

impl Presence {
    /// A terminal this process spawned or rebuilt.
    pub(crate) fn live(terminal: Arc<dyn BackendTerminal>) -> Self {
        Presence::Live {
            terminal,
            seen_dead: None,
        }
    }

    /// What a scan found of a record: its cheap check, else what adopting
    /// it gave (`Err` holds why adoption failed).
    pub(crate) fn scanned(
        checked: Option<RecordCheck>,
        adopted: Result<Option<Arc<dyn BackendTerminal>>, String>,
    ) -> Self {
        match (checked, adopted) {
            (Some(checked), _) => Presence::Unadopted {
                checked: Some(checked),
                failure: String::new(),
            },
            (None, Ok(Some(terminal))) => Presence::live(terminal),
            (None, Ok(None)) => Presence::Gone {
                reason: NOT_RUNNING.to_owned(),
            },
            (None, Err(failure)) => Presence::Unadopted {
                checked: None,
                failure,
            },
        }
    }

    /// The status callers see: the backend's, unless a probe saw it dead
    /// first.
    pub(crate) fn status(&self) -> TerminalStatus {
        match self {
            Presence::Unadopted {
                checked: Some(checked),
                ..
            } => checked.status.clone(),
            Presence::Unadopted { failure, .. } => TerminalStatus::Gone {
                reason: failure.clone(),
            },
            Presence::Live {
                terminal,
                seen_dead,
            } => match (terminal.status(), seen_dead) {
                (TerminalStatus::Running, Some(dead)) => dead.clone(),
                (status, _) => status,
            },
            Presence::Gone { reason } => TerminalStatus::Gone {
                reason: reason.clone(),
            },
        }
    }

    /// The pane's process, when known.
    pub(crate) fn pid(&self) -> Option<u32> {
        match self {
            Presence::Unadopted { checked, .. } => checked.as_ref().and_then(|c| c.pid),
            Presence::Live { terminal, .. } => terminal.pid(),
            Presence::Gone { .. } => None,
        }
    }

    /// The live terminal, if this process holds one.
    pub(crate) fn terminal(&self) -> Option<Arc<dyn BackendTerminal>> {
        match self {
            Presence::Live { terminal, .. } => Some(Arc::clone(terminal)),
            _ => None,
        }
    }

    /// Lets go of the entry, returning the live terminal if there was one.
    pub(crate) fn into_terminal(self) -> Option<Arc<dyn BackendTerminal>> {
        match self {
            Presence::Live { terminal, .. } => Some(terminal),
            _ => None,
        }
    }

    /// Whether a command must adopt it first.
    pub(crate) fn is_unadopted(&self) -> bool {
        matches!(self, Presence::Unadopted { .. })
    }

    /// Why there is no live terminal (empty when there is one).
    pub(crate) fn gone_reason(&self) -> String {
        match self {
            Presence::Unadopted { failure, .. } => failure.clone(),
            Presence::Gone { reason } => reason.clone(),
            Presence::Live { .. } => String::new(),
        }
    }

    /// What a lazy adoption found: the terminal, or proof it is gone.
    pub(crate) fn adopted(&mut self, adopted: Option<Arc<dyn BackendTerminal>>) {
        *self = Presence::scanned(None, Ok(adopted));
    }

    /// A probe saw it dead: reported even while the backend's own status
    /// still says running.
    pub(crate) fn saw_dead(&mut self, dead: TerminalStatus) {
        if let Presence::Live { seen_dead, .. } = self {
            *seen_dead = Some(dead);
        }
    }

    /// Its program was restarted in place.
    pub(crate) fn respawned(&mut self) {
        if let Presence::Live { seen_dead, .. } = self {
            *seen_dead = None;
        }
    }

    /// Another process rebuilt it: it must be adopted again. Returns the
    /// old live terminal, for the caller to let go of.
    pub(crate) fn rebuilt_elsewhere(&mut self) -> Option<Arc<dyn BackendTerminal>> {
        let old = std::mem::replace(
            self,
            Presence::Unadopted {
                checked: None,
                failure: String::new(),
            },
        );
        old.into_terminal()
    }
}
