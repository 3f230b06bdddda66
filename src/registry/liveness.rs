//! Liveness and recreation: `probe`, `attach`, `revive` (a send, read or
//! wait bringing a dead `on-attach` terminal back as attach does), and
//! the restart policies.
//!
//! Probes and recreations of one terminal are serialized by its liveness
//! lock (a `tokio::sync::Mutex`), which makes "exactly once under concurrent
//! probes" hold: the first prober recreates; the next one finds it alive.
//! Only a terminal known dead (exited or gone) is recreated, never an alive
//! or unresponsive one, and never one being killed.
//!
//! Recreation is backend-agnostic: an exited program is respawned in place
//! ([`BackendTerminal::respawn`]); a gone session or server (or a respawn
//! answering `SERVER_GONE`) is rebuilt through [`Backend::spawn`] with the
//! same id and persisted spec, and its record rewritten.
//!
//! [`Backend::spawn`]: super::Backend::spawn

use std::sync::Arc;

use serde::Serialize;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::seam::{BackendTerminal, CloseReason, Liveness, SpawnRequest};
use super::service::Owned;
use super::state::Presence;
use super::values::TerminalSnapshot;
use super::viewed::ViewedTerminal;
use super::{Registry, TerminalId};
use crate::statedir::Purpose;
use crate::statedir::{StateDir, TerminalRecord};
use crate::vocab::RestartPolicy;
use crate::{Error, Result};

/// What [`Owned::probe`] found and did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProbeReport {
    /// What the probe observed, before any recreation.
    pub observed: Liveness,
    /// Whether the probe recreated the terminal (`on-attach` policy).
    pub recreated: bool,
    /// The terminal after the probe.
    pub snapshot: TerminalSnapshot,
}

/// A terminal checked alive for attaching, returned by
/// [`Owned::attach`].
#[derive(Debug)]
pub struct AttachTarget {
    /// The terminal after the check.
    pub snapshot: TerminalSnapshot,
    /// The live terminal (fresh when it was just recreated), as a viewer
    /// may use it.
    pub terminal: ViewedTerminal,
    /// Whether it was recreated by this check.
    pub recreated: bool,
}

impl Registry {
    /// Probes the terminal `id`, attaching it first if needed; an
    /// adoption that timed out is `Unresponsive`, never `ServerGone`. The
    /// caller holds its liveness lock.
    pub(super) async fn observe(&self, id: &TerminalId) -> Result<Liveness> {
        match self.adopted(id).await {
            Ok(Some(terminal)) => terminal.probe().await,
            Ok(None) => {
                let reason = self.inner.lock().entry(id)?.presence.gone_reason();
                Ok(Liveness::ServerGone { reason })
            }
            Err(Error::Unresponsive { timeout, .. }) => {
                Ok(Liveness::Unresponsive { waited: timeout })
            }
            Err(error) => Err(error),
        }
    }

    /// Recreates a dead terminal; the caller holds its liveness lock.
    ///
    /// Across processes: under the terminal's `live` lock, the record is
    /// read again (another process may have rebuilt it meanwhile: then its
    /// rebuild is adopted, not repeated) and the terminal probed again (a
    /// respawn elsewhere makes it alive). Never starts a second server
    /// while the first may live: a terminal that does not answer is not
    /// recreated, and the old server is killed (its close, or the backend's
    /// `retire` of the record) before a new one starts; if that fails,
    /// nothing starts.
    pub(crate) async fn recreate(&self, id: &TerminalId) -> Result<()> {
        let store = &self.inner.store;
        let _live = store
            .lock(StateDir::terminal_lock(id, Purpose::Live))
            .await?;
        if store.is_shared() && self.rebuilt_elsewhere(id).await? {
            return Ok(());
        }
        let now = self.observe(id).await?;
        if let Liveness::Unresponsive { waited } = now {
            return Err(Error::Unresponsive {
                command: format!("recreating terminal {id}"),
                timeout: waited,
            });
        }
        if !now.is_dead() {
            // Respawned by another process since the caller looked.
            return Ok(());
        }
        let (terminal, record, cancel, rebooted) = {
            let state = self.inner.lock();
            let entry = state.entry(id)?;
            if entry.closing.is_some() {
                return Err(Error::TerminalClosing(id.to_string()));
            }
            (
                entry.presence.terminal(),
                entry.record.clone(),
                entry.cancel.child_token(),
                entry.presence.gone_reason() == super::HOST_RESTARTED,
            )
        };
        if let (Liveness::Exited { .. }, Some(terminal)) = (&now, &terminal)
            && self.respawn_in_place(id, terminal).await?
        {
            return Ok(());
        }
        self.rebuild(id, terminal, record, cancel, rebooted).await
    }

    /// Whether another process rebuilt `id` and that one is not dead: the
    /// record on disk names another terminal, which this entry then adopts
    /// (letting go of the old one).
    async fn rebuilt_elsewhere(&self, id: &TerminalId) -> Result<bool> {
        let Some(on_disk) = self.inner.store.read(id).await? else {
            return Err(Error::NoTerminal(id.to_string()));
        };
        let rebuilt = {
            let mut state = self.inner.lock();
            let entry = state.entry_mut(id)?;
            if on_disk.locator == entry.record.locator {
                // Renamed elsewhere, maybe: the rebuild writes this record.
                entry.record.spec.name = on_disk.spec.name;
                false
            } else {
                entry.record = on_disk;
                if let Some(old) = entry.presence.rebuilt_elsewhere() {
                    self.inner.tasks.spawn(async move { old.shutdown().await });
                }
                true
            }
        };
        Ok(rebuilt && !self.observe(id).await?.is_dead())
    }

    /// Reruns the exited program in its pane; `false` when the server is
    /// gone, so only a rebuild helps.
    async fn respawn_in_place(
        &self,
        id: &TerminalId,
        terminal: &Arc<dyn BackendTerminal>,
    ) -> Result<bool> {
        match terminal.respawn().await {
            Ok(()) => {
                let mut state = self.inner.lock();
                let entry = state.entry_mut(id)?;
                entry.presence.respawned();
                entry.restarts += 1;
                info!(terminal = %id, restarts = entry.restarts, "respawned a dead pane");
                Ok(true)
            }
            Err(error) if error.code() == "SERVER_GONE" => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Replaces `id`'s terminal by a fresh one of the same record: closes
    /// or retires the old, spawns, writes the record, then swaps it in
    /// (closing the fresh one if the entry went meanwhile).
    async fn rebuild(
        &self,
        id: &TerminalId,
        terminal: Option<Arc<dyn BackendTerminal>>,
        mut record: TerminalRecord,
        cancel: CancellationToken,
        rebooted: bool,
    ) -> Result<()> {
        let backend = Arc::clone(&self.inner.backend);
        // After a reboot a kept terminal comes back with its history
        // first, in its last working directory (history.rs).
        let restore = if rebooted && record.spec.keeps_history() {
            self.prepare_restore(id).await?
        } else {
            None
        };
        let mut spec = record.spec.clone();
        let mut from = 0;
        let restore = restore.map(|(restore, cwd)| {
            if let Some(cwd) = cwd {
                spec.cwd = Some(cwd);
            }
            from = restore.kept_bytes;
            restore
        });
        let restoring = restore.is_some();
        // The old server must be gone before the same id returns: close
        // what this process holds (its server too, if it came back), or
        // retire what the record names. A failure starts nothing.
        match terminal {
            Some(old) => old.close(CloseReason::Replaced).await?,
            None => backend.retire(&record).await?,
        }
        let fresh = backend
            .spawn(SpawnRequest {
                id: id.clone(),
                owner: record.owner.clone(),
                spec,
                cancel,
                restore,
            })
            .await
            .map_err(|error| match error {
                Error::BackendCleanup { cause, .. } => *cause,
                other => other,
            })?;
        record.locator = fresh.locator();
        record.boot_id = self.boot_id();
        if let Err(error) = self.inner.store.write(&record).await {
            let _ = fresh.close(CloseReason::RolledBack).await;
            return Err(error);
        }
        let swapped = {
            let mut state = self.inner.lock();
            match state.entries.get_mut(id) {
                Some(entry) if entry.closing.is_none() => {
                    entry.presence = Presence::live(Arc::clone(&fresh));
                    entry.record = record;
                    entry.restarts += 1;
                    info!(terminal = %id, restarts = entry.restarts, "rebuilt a gone terminal");
                    Ok(())
                }
                Some(_) => Err(Error::TerminalClosing(id.to_string())),
                None => Err(Error::NoTerminal(id.to_string())),
            }
        };
        if swapped.is_err()
            && let Err(error) = fresh.close(CloseReason::RolledBack).await
        {
            warn!(terminal = %id, error = %error, "closing a rebuilt terminal nobody owns failed");
        }
        if swapped.is_ok() {
            self.follow_history(id, from);
            if restoring {
                self.resume(id, fresh);
            }
        }
        swapped
    }
}

/// The longest a use of a just restored terminal waits for its
/// `resume_command` to end (the resume send's own timeout).
const RESUME_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

impl Owned<'_> {
    /// Brings a dead `on-attach` terminal back before a send, read or wait
    /// uses it, as [`attach`](Owned::attach) does (a gone one rebuilt, its
    /// kept history restored and its `resume_command` typed; an exited one
    /// respawned in place), and answers whether this call recreated it.
    /// A handle that may not start programs ([`Owned::read_only`]) never
    /// recreates. Either way a restore's `resume_command` still being
    /// typed is waited for (at most 30 s), so the use comes after it.
    ///
    /// # Errors
    ///
    /// `NO_TERMINAL`, `FOREIGN_TERMINAL`, and the errors of
    /// [`probe`](Owned::probe).
    pub async fn revive(self, target: &str) -> Result<bool> {
        let registry = self.registry;
        let id = registry.locate(self.owner, target).await?;
        let dead_on_attach = {
            let state = registry.inner.lock();
            let entry = state.entry(&id)?;
            entry.record.spec.restart == RestartPolicy::OnAttach
                && !entry.status().is_running()
                && entry.closing.is_none()
        };
        let recreated = self.starts && dead_on_attach && self.probe(target).await?.recreated;
        let resuming = registry.inner.lock().entry(&id)?.resuming.clone();
        if let Some(resuming) = resuming {
            let _ = tokio::time::timeout(RESUME_WAIT, resuming.cancelled()).await;
        }
        Ok(recreated)
    }

    /// Asks whether the terminal is alive, with the backend's right probe
    /// for its state, and records a death it finds. A dead `on-attach`
    /// terminal is recreated (once, however many probes run concurrently);
    /// other policies only report.
    ///
    /// # Errors
    ///
    /// `NO_TERMINAL`, `FOREIGN_TERMINAL`, `REGISTRY_DISPOSING`, the probe's
    /// own failure, or the recreation's (`NO_BACKEND`, the backend's
    /// error).
    pub async fn probe(self, target: &str) -> Result<ProbeReport> {
        let starts = self.starts;
        self.probe_with(target, starts).await
    }

    /// [`probe`](Owned::probe), recreating a dead `on-attach` terminal
    /// only when `recreate` says so.
    async fn probe_with(self, target: &str, recreate: bool) -> Result<ProbeReport> {
        let (registry, owner) = (self.registry, self.owner);
        let id = registry.locate(owner, target).await?;
        let lock = Arc::clone(&registry.inner.lock().entry(&id)?.liveness);
        let _serialized = lock.lock().await;
        let policy = {
            let state = registry.inner.lock();
            state.check_active()?;
            state.entry(&id)?.record.spec.restart
        };
        let observed = registry.observe(&id).await?;
        let closing = {
            let mut state = registry.inner.lock();
            let entry = state.entry_mut(&id)?;
            if let Some(dead) = observed.dead_status() {
                entry.presence.saw_dead(dead);
            } else if observed == Liveness::Alive {
                // A death seen before is over: another process brought
                // the program back.
                entry.presence.respawned();
            }
            entry.closing.is_some()
        };
        let recreated =
            recreate && observed.is_dead() && policy == RestartPolicy::OnAttach && !closing;
        if recreated {
            registry.recreate(&id).await?;
        }
        let snapshot = registry.inner.lock().entry(&id)?.snapshot();
        Ok(ProbeReport {
            observed,
            recreated,
            snapshot,
        })
    }

    /// Checks the terminal alive before someone attaches to it: probes (so
    /// a stale "running" is caught), recreates a dead `on-attach` terminal,
    /// and returns the live backend terminal to attach to.
    ///
    /// # Errors
    ///
    /// `TERMINAL_DEAD` for a dead terminal its policy does not recreate
    /// here (its exit status stays visible in `list`), `UNRESPONSIVE` when
    /// the probe got no answer, and the errors of
    /// [`probe`](Owned::probe).
    /// A handle that may not start programs ([`Owned::read_only`]: a
    /// read-only viewer) never recreates: a dead `on-attach` terminal is
    /// `TERMINAL_DEAD` for it.
    pub async fn attach(self, target: &str) -> Result<AttachTarget> {
        let starts = self.starts;
        self.attach_with(target, starts).await
    }

    async fn attach_with(self, target: &str, recreate: bool) -> Result<AttachTarget> {
        let registry = self.registry;
        let report = self.probe_with(target, recreate).await?;
        if let Liveness::Unresponsive { waited } = report.observed {
            return Err(Error::Unresponsive {
                command: format!("liveness probe of terminal {}", report.snapshot.id),
                timeout: waited,
            });
        }
        if report.observed.is_dead() && !report.recreated {
            return Err(Error::TerminalDead {
                terminal: report.snapshot.id.to_string(),
                status: report.snapshot.status.to_string(),
            });
        }
        let terminal = {
            let state = registry.inner.lock();
            state.entry(&report.snapshot.id)?.live_terminal()?
        };
        Ok(AttachTarget {
            snapshot: report.snapshot,
            terminal: ViewedTerminal::new(terminal),
            recreated: report.recreated,
        })
    }
}
