//! The registry's shared maps and their invariants, and whether this
//! process holds each terminal: one [`Presence`] per entry, changed only
//! through its methods, read by [`Presence::status`] (what `list` and
//! `show` report).
//!
//! Everything here is synchronous and lives behind one `std::sync::Mutex`
//! (never held across `.await`): published terminals, unpublished
//! spawns and reserved names. No I/O and no
//! backend calls happen here.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::future::{BoxFuture, Shared};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::seam::{BackendTerminal, RecordCheck, TerminalStatus};
use super::values::TerminalSnapshot;
use super::{OwnerId, TerminalId};
use crate::history::Kept;
use crate::statedir::{CorruptRecord, FileLock, TerminalRecord};
use crate::stream::Stream;
use crate::{Error, Result};

/// A terminal's kept history and who keeps its live stream: the pane's
/// relay (asked by `Registry::follow_history`), or this process's writer
/// where no relay does (`registry/history.rs`).
pub(crate) struct Keeping {
    pub(crate) kept: Arc<Kept>,
    /// The stream being kept, if any: a new one is asked for again.
    pub(super) stream: Option<Arc<Stream>>,
    /// Stops the writer (which then writes what it has) when dropped.
    pub(super) _stop: Option<DropGuard>,
    /// Cancelled once the writer has ended: its last write is on disk, so
    /// a kill removes the files only after it (or the write would bring
    /// them back).
    pub(crate) finished: Option<CancellationToken>,
    /// This process's claim to write the history (`Purpose::History`).
    pub(super) writing: Option<FileLock>,
}

/// A close in flight, shared by every caller that joins it.
pub(crate) type CloseFuture = Shared<BoxFuture<'static, Result<(), Arc<Error>>>>;

/// A close in flight on one terminal.
pub(crate) struct Closing {
    /// Which close this is, so a failed one never clears a newer one.
    pub(crate) generation: u64,
    pub(crate) future: CloseFuture,
}

/// One published terminal.
pub(crate) struct Entry {
    /// What is (or would be) persisted: id, owner, spec, locator.
    pub(crate) record: TerminalRecord,
    /// Tie-breaker of creation order within this process.
    pub(crate) seq: u64,
    /// Whether this process holds the terminal, and what is known of it.
    pub(crate) presence: Presence,
    /// The generation of the send in flight, if any.
    pub(crate) active_send: Option<u64>,
    pub(crate) closing: Option<Closing>,
    /// Serializes probes and recreation, so concurrent probes recreate once.
    pub(crate) liveness: Arc<tokio::sync::Mutex<()>>,
    /// Cancelled when the entry leaves the registry; stops its tasks.
    pub(crate) cancel: CancellationToken,
    /// How many times the registry recreated it.
    pub(crate) restarts: u32,
    /// Its kept history and the task writing it, when it keeps one.
    pub(crate) history: Option<Keeping>,
    /// Cancelled once a restore's `resume_command` was typed and ended: a
    /// use that brought the terminal back waits for it first, so its own
    /// text never meets the resume command's at one prompt.
    pub(crate) resuming: Option<CancellationToken>,
    /// What `list` last answered of it, kept for the next list.
    pub(crate) listed: Option<Listed>,
}

impl Entry {
    /// A fresh entry for `record`.
    pub(crate) fn new(
        record: TerminalRecord,
        seq: u64,
        presence: Presence,
        cancel: CancellationToken,
    ) -> Self {
        Entry {
            record,
            seq,
            presence,
            active_send: None,
            closing: None,
            liveness: Arc::new(tokio::sync::Mutex::new(())),
            cancel,
            restarts: 0,
            history: None,
            resuming: None,
            listed: None,
        }
    }

    /// The status callers see (see [`Presence::status`]).
    pub(crate) fn status(&self) -> TerminalStatus {
        self.presence.status()
    }

    /// What callers see of this entry.
    pub(crate) fn snapshot(&self) -> TerminalSnapshot {
        let record = &self.record;
        TerminalSnapshot {
            id: record.id.clone(),
            owner: record.owner.clone(),
            name: record.spec.name.clone(),
            role: record.spec.role.clone(),
            kind: record.kind.clone(),
            pid: self.presence.pid(),
            status: self.status(),
            restart: record.spec.restart,
            restarts: self.restarts,
            created_ms: record.created_ms,
            output_path: self
                .presence
                .terminal()
                .and_then(|t| t.output_path().map(str::to_owned)),
            keep_history: record.spec.keeps_history(),
            restored_ms: self
                .history
                .as_ref()
                .and_then(|h| h.kept.meta().restored_ms),
            history_error: self.history.as_ref().and_then(|h| h.kept.error()),
        }
    }

    /// The backend terminal, or why there is none.
    pub(crate) fn live_terminal(&self) -> Result<Arc<dyn BackendTerminal>> {
        self.presence.terminal().ok_or_else(|| Error::TerminalDead {
            terminal: self.record.id.to_string(),
            status: self.status().to_string(),
        })
    }
}

/// The snapshot an entry was last listed as, and its JSON (kept and
/// compared by `listing.rs`).
pub(crate) struct Listed {
    pub(super) snapshot: TerminalSnapshot,
    pub(super) json: Box<[u8]>,
    /// The live terminal's word for its part of the snapshot, when it gave one.
    pub(super) vouched: Option<Vouched>,
}

/// A live terminal's [`listing_stamp`](BackendTerminal::listing_stamp),
/// read before the snapshot it vouches for was made.
pub(crate) struct Vouched {
    /// Which terminal gave it: weak, so the terminal is not kept, yet its
    /// allocation is (no other terminal can come to have its address).
    pub(super) terminal: std::sync::Weak<dyn BackendTerminal>,
    pub(super) stamp: u64,
}

/// One spawn between reservation and publication (or failure).
pub(crate) struct Pending {
    pub(crate) owner: OwnerId,
    pub(crate) id: TerminalId,
    pub(crate) name: Option<String>,
    /// Cancelled by disposal; the backend's token is a child of it.
    pub(crate) abort: CancellationToken,
    /// Set once disposal aborted it: the spawner then sees
    /// `REGISTRY_DISPOSING`, whatever the backend answered.
    pub(crate) aborted: bool,
    /// Cancelled once the spawn has settled (published or rolled back).
    pub(crate) settled: CancellationToken,
    /// A rollback or backend cleanup failure kept until disposal reports it.
    pub(crate) cleanup_failure: Option<Arc<Error>>,
}

/// Everything behind the registry's lock.
#[derive(Default)]
pub(crate) struct State {
    pub(crate) disposing: bool,
    pub(crate) entries: HashMap<TerminalId, Entry>,
    /// Unpublished spawns by reservation key.
    pub(crate) pending: HashMap<u64, Pending>,
    /// What the last scan found corrupt (see `Registry::corrupt_records`).
    pub(crate) corrupt: Vec<CorruptRecord>,
    /// Terminals (known and spawning) one owner may have; `None`: any.
    pub(crate) max_per_owner: Option<usize>,
    next_counter: u64,
    /// Counts insertions into and removals from `entries`: a scan skips
    /// the records it already reconciled only while this stands still.
    pub(crate) changes: u64,
}

impl State {
    /// A number never returned before by this state.
    pub(crate) fn next(&mut self) -> u64 {
        self.next_counter += 1;
        self.next_counter
    }

    /// The last number [`next`](Self::next) returned: an entry whose `seq`
    /// is above it was published after this call.
    pub(crate) fn horizon(&self) -> u64 {
        self.next_counter
    }

    /// Fails with `REGISTRY_DISPOSING` once disposal began.
    pub(crate) fn check_active(&self) -> Result<()> {
        if self.disposing {
            Err(Error::RegistryDisposing)
        } else {
            Ok(())
        }
    }

    /// Whether `owner` already uses `name`, published or in flight.
    pub(crate) fn name_taken(&self, owner: &OwnerId, name: &str) -> bool {
        self.entries.values().any(|entry| {
            &entry.record.owner == owner && entry.record.spec.name.as_deref() == Some(name)
        }) || self
            .pending
            .values()
            .any(|pending| &pending.owner == owner && pending.name.as_deref() == Some(name))
    }

    /// Resolves `target` (an id, else a name of the owner's) to the id of a
    /// terminal `owner` may use.
    ///
    /// The id is tried first: an id names one terminal whatever anyone
    /// called theirs (names of that shape are refused, but a record
    /// written before that rule may still hold one). Names are looked up
    /// only among the owner's own terminals, so another owner can never
    /// shadow them; another owner's id is `FOREIGN_TERMINAL` unless the
    /// owner has a terminal of that name.
    pub(crate) fn resolve(&self, owner: &OwnerId, target: &str) -> Result<TerminalId> {
        let by_id = TerminalId::parse(target)
            .ok()
            .and_then(|id| self.entries.get(&id));
        if let Some(entry) = by_id.filter(|entry| &entry.record.owner == owner) {
            return Ok(entry.record.id.clone());
        }
        if let Some(entry) = self.entries.values().find(|entry| {
            &entry.record.owner == owner && entry.record.spec.name.as_deref() == Some(target)
        }) {
            return Ok(entry.record.id.clone());
        }
        match by_id {
            Some(_) => Err(Error::ForeignTerminal(target.to_owned())),
            None => Err(Error::NoTerminal(target.to_owned())),
        }
    }

    /// The entry of `id`, which callers resolved earlier; `NO_TERMINAL` if
    /// it left meanwhile.
    pub(crate) fn entry(&self, id: &TerminalId) -> Result<&Entry> {
        self.entries
            .get(id)
            .ok_or_else(|| Error::NoTerminal(id.to_string()))
    }

    /// Mutable access to the entry of `id`.
    pub(crate) fn entry_mut(&mut self, id: &TerminalId) -> Result<&mut Entry> {
        self.entries
            .get_mut(id)
            .ok_or_else(|| Error::NoTerminal(id.to_string()))
    }

    /// Whether `id` is reserved by an unpublished spawn.
    /// `owner`'s terminals, those being spawned included.
    pub(crate) fn count_of(&self, owner: &OwnerId) -> usize {
        self.entries
            .values()
            .filter(|entry| &entry.record.owner == owner)
            .count()
            + self
                .pending
                .values()
                .filter(|pending| &pending.owner == owner)
                .count()
    }

    pub(crate) fn is_pending(&self, id: &TerminalId) -> bool {
        self.pending.values().any(|pending| &pending.id == id)
    }

    /// Publishes `entry`.
    pub(crate) fn insert_entry(&mut self, entry: Entry) {
        self.changes += 1;
        self.entries.insert(entry.record.id.clone(), entry);
    }

    /// Removes an entry and stops its tasks.
    pub(crate) fn remove_entry(&mut self, id: &TerminalId) -> Option<Entry> {
        let entry = self.entries.remove(id)?;
        self.changes += 1;
        entry.cancel.cancel();
        Some(entry)
    }
}

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
