//! Liveness and recreation: `probe`, `attach`, and the restart policies.
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

use std::sync::{Arc, Weak};

use schemars::JsonSchema;
use serde::Serialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::locks::Purpose;
use super::persist::StateDir;
use super::presence::Presence;
use super::seam::{BackendTerminal, CloseReason, Liveness, SpawnRequest};
use super::service::Inner;
use super::service::Owned;
use super::spec::{RestartPolicy, TerminalSnapshot};
use super::viewed::ViewedTerminal;
use super::{Registry, TerminalId};
use crate::{Error, Result};

/// What [`Owned::probe`] found and did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
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
    /// Attaches the terminal `id` if it is recorded but not attached here
    /// yet (see `Backend::check`), and returns the live backend terminal,
    /// or `None` when it is proven gone. The caller holds its liveness
    /// lock.
    ///
    /// # Errors
    ///
    /// The adoption's failure, e.g. `UNRESPONSIVE`: the terminal then stays
    /// unadopted (it may well live), never marked gone.
    pub(crate) async fn adopted(
        &self,
        id: &TerminalId,
    ) -> Result<Option<Arc<dyn BackendTerminal>>> {
        let (record, backend) = {
            let state = self.inner.lock();
            let entry = state.entry(id)?;
            if !entry.presence.is_unadopted() {
                return Ok(entry.presence.terminal());
            }
            (entry.record.clone(), Arc::clone(&self.inner.backend))
        };
        let adopted = backend.adopt(&record).await?;
        let kept = {
            let mut state = self.inner.lock();
            match state.entries.get_mut(id) {
                Some(entry) => {
                    entry.presence.adopted(adopted.clone());
                    true
                }
                None => false,
            }
        };
        if kept {
            return Ok(adopted);
        }
        if let Some(terminal) = adopted {
            terminal.shutdown().await;
        }
        Err(Error::NoTerminal(id.to_string()))
    }

    /// Probes the terminal `id`, attaching it first if needed; an
    /// adoption that timed out is `Unresponsive`, never `ServerGone`. The
    /// caller holds its liveness lock.
    async fn observe(&self, id: &TerminalId) -> Result<Liveness> {
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
        if store.is_shared() {
            let on_disk = store.read(id).await?;
            let Some(on_disk) = on_disk else {
                return Err(Error::NoTerminal(id.to_string()));
            };
            let rebuilt_elsewhere = {
                let mut state = self.inner.lock();
                let entry = state.entry_mut(id)?;
                if on_disk.locator == entry.record.locator {
                    false
                } else {
                    // Another process rebuilt it: adopt that one.
                    entry.record = on_disk;
                    if let Some(old) = entry.presence.rebuilt_elsewhere() {
                        self.inner.tasks.spawn(async move { old.shutdown().await });
                    }
                    true
                }
            };
            if rebuilt_elsewhere && !self.observe(id).await?.is_dead() {
                return Ok(());
            }
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
        let observed = &now;
        let (terminal, mut record, backend, cancel) = {
            let state = self.inner.lock();
            let entry = state.entry(id)?;
            if entry.closing.is_some() {
                return Err(Error::TerminalClosing(id.to_string()));
            }
            (
                entry.presence.terminal(),
                entry.record.clone(),
                Arc::clone(&self.inner.backend),
                entry.cancel.child_token(),
            )
        };
        if let (Liveness::Exited { .. }, Some(terminal)) = (observed, &terminal) {
            match terminal.respawn().await {
                Ok(()) => {
                    let mut state = self.inner.lock();
                    let entry = state.entry_mut(id)?;
                    entry.presence.respawned();
                    entry.restarts += 1;
                    info!(terminal = %id, restarts = entry.restarts, "respawned a dead pane");
                    return Ok(());
                }
                Err(error) if error.code() == "SERVER_GONE" => {}
                Err(error) => return Err(error),
            }
        }
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
                spec: record.spec.clone(),
                cancel,
            })
            .await
            .map_err(|error| match error {
                Error::BackendCleanup { cause, .. } => *cause,
                other => other,
            })?;
        record.locator = fresh.locator();
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
        swapped
    }

    /// Starts the `always` policy's watcher of one terminal.
    pub(crate) fn start_restart_loop(&self, id: TerminalId, cancel: CancellationToken) {
        let inner = Arc::downgrade(&self.inner);
        self.inner.tasks.spawn(restart_loop(inner, id, cancel));
    }
}

/// The `always` policy: wait for a pushed death, back off, recreate; give
/// up after `max_restarts` consecutive recreations. Holds only a weak
/// reference while waiting, so a dropped registry ends it.
async fn restart_loop(inner: Weak<Inner>, id: TerminalId, cancel: CancellationToken) {
    let Some(_supervisor) = supervise(&inner, &id, &cancel).await else {
        return;
    };
    let mut attempts: u32 = 0;
    loop {
        let Some(registry) = inner.upgrade().map(|inner| Registry { inner }) else {
            return;
        };
        let backoff = registry.inner.config.backoff;
        let terminal = match registry.inner.lock().entries.get(&id) {
            Some(entry) => entry.presence.terminal(),
            None => return,
        };
        drop(registry);
        if let Some(terminal) = terminal {
            let running_since = Instant::now();
            let mut status = terminal.watch_status();
            drop(terminal);
            tokio::select! {
                () = cancel.cancelled() => return,
                // A dropped sender means the backend lost the terminal: dead.
                _ = status.wait_for(|status| !status.is_running()) => {}
            }
            if running_since.elapsed() >= backoff.stable_after {
                attempts = 0;
            }
        }
        if attempts >= backoff.max_restarts {
            warn!(terminal = %id, attempts, "restart cap reached; leaving the terminal dead");
            return;
        }
        let delay = backoff.delay(attempts);
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(delay) => {}
        }
        attempts += 1;
        // A failed attempt leaves the terminal dead, so the next turn backs
        // off again before retrying.
        if let Err(error) = restart_once(&inner, &id).await {
            warn!(terminal = %id, error = %error, attempt = attempts, "recreating a dead terminal failed");
        }
    }
}

/// How often a process that does not run a terminal's `always` loop looks
/// whether the process that does has gone (a `flock` cannot be awaited
/// without a thread blocked on it per terminal).
const SUPERVISOR_RETRY: std::time::Duration = std::time::Duration::from_secs(2);

/// Becomes the one process running `id`'s `always` loop: takes its
/// `restart` lock (retrying while another process holds it), then attaches
/// the terminal if it is recorded but not attached here. `None` when the
/// loop must end (cancelled, registry or terminal gone).
async fn supervise(
    inner: &Weak<Inner>,
    id: &TerminalId,
    cancel: &CancellationToken,
) -> Option<Option<super::locks::FileLock>> {
    let lock = loop {
        let registry = inner.upgrade().map(|inner| Registry { inner })?;
        let store = registry.inner.store.clone();
        if !store.is_shared() {
            break None;
        }
        match store
            .try_lock(StateDir::terminal_lock(id, Purpose::Restart))
            .await
        {
            Ok(Some(lock)) => break Some(lock),
            Ok(None) => {}
            Err(error) => warn!(terminal = %id, %error, "restart lock"),
        }
        drop(registry);
        tokio::select! {
            () = cancel.cancelled() => return None,
            () = tokio::time::sleep(SUPERVISOR_RETRY) => {}
        }
    };
    loop {
        let registry = inner.upgrade().map(|inner| Registry { inner })?;
        let liveness = Arc::clone(&registry.inner.lock().entries.get(id)?.liveness);
        let adopted = {
            let _serialized = liveness.lock().await;
            registry.adopted(id).await
        };
        match adopted {
            Ok(_) => return Some(lock),
            Err(error) => warn!(terminal = %id, %error, "attaching a supervised terminal"),
        }
        drop(registry);
        tokio::select! {
            () = cancel.cancelled() => return None,
            () = tokio::time::sleep(SUPERVISOR_RETRY) => {}
        }
    }
}

/// One recreation attempt of the `always` loop, under the liveness lock;
/// skipped when the terminal turned out alive or is being killed.
async fn restart_once(inner: &Weak<Inner>, id: &TerminalId) -> Result<()> {
    let Some(registry) = inner.upgrade().map(|inner| Registry { inner }) else {
        return Ok(());
    };
    let lock = Arc::clone(&registry.inner.lock().entry(id)?.liveness);
    let _serialized = lock.lock().await;
    if registry.inner.lock().entry(id)?.closing.is_some() {
        return Ok(());
    }
    let observed = registry.observe(id).await?;
    if !observed.is_dead() {
        return Ok(());
    }
    registry.recreate(id).await
}

impl Owned<'_> {
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
            }
            entry.closing.is_some()
        };
        let recreated = observed.is_dead() && policy == RestartPolicy::OnAttach && !closing;
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
    pub async fn attach(self, target: &str) -> Result<AttachTarget> {
        let registry = self.registry;
        let report = self.probe(target).await?;
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
