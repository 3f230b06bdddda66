//! `spawn`: reservation of the id and name, backend setup in a task (so a
//! dropped caller cannot drop it half-way), persistence, publication, and
//! rollback of everything that never got published.

use std::sync::{Arc, PoisonError};

use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::seam::{BackendTerminal, CloseReason, SpawnRequest};
use super::service::{Inner, Owned};
use super::state::Presence;
use super::state::{Entry, Pending, State};
use super::values::TerminalSnapshot;
use super::{OwnerId, Registry, SpawnSpec, TerminalId};
use crate::statedir::{FileLock, Purpose};
use crate::statedir::{StateDir, TerminalRecord};
use crate::vocab::RestartPolicy;
use crate::{Error, Result};

impl Registry {
    /// Checks the request and reserves its id and name.
    fn reserve(&self, owner: &OwnerId, spec: &SpawnSpec) -> Result<Reservation> {
        let mut state = self.inner.lock();
        state.check_active()?;
        spec.validate()?;
        if let Some(name) = &spec.name
            && state.name_taken(owner, name)
        {
            return Err(Error::DuplicateName(format!("{name} (owner {owner})")));
        }
        if let Some(max) = state.max_per_owner
            && state.count_of(owner) >= max
        {
            return Err(Error::TooManyTerminals(format!(
                "owner {owner} has {max} terminals, the most it may have: kill some first"
            )));
        }
        let id = loop {
            let id = TerminalId::mint()?;
            if !state.entries.contains_key(&id) && !state.is_pending(&id) {
                break id;
            }
        };
        let key = state.next();
        let abort = CancellationToken::new();
        state.pending.insert(
            key,
            Pending {
                owner: owner.clone(),
                id: id.clone(),
                name: spec.name.clone(),
                abort: abort.clone(),
                aborted: false,
                settled: CancellationToken::new(),
                cleanup_failure: None,
            },
        );
        Ok(Reservation {
            inner: Arc::clone(&self.inner),
            key,
            id,
            owner: owner.clone(),
            abort,
            settled: false,
        })
    }

    /// The body of [`spawn`](Owned::spawn), run as a task.
    async fn run_spawn(
        self,
        mut reservation: Reservation,
        spec: SpawnSpec,
        caller: CancellationToken,
        // Held to the end of the spawn, published or rolled back.
        _name_lock: Option<FileLock>,
    ) -> Result<TerminalSnapshot> {
        // Held until the record is written or the spawn rolled back: a
        // reaper (another process's start) sees a spawn in progress here,
        // and one whose process died as abandoned. Taken in the task, so
        // a spawn dropped before it started leaves no lock file behind.
        let spawn_lock = match self
            .inner
            .store
            .lock(StateDir::terminal_lock(&reservation.id, Purpose::Spawn))
            .await
        {
            Ok(lock) => lock,
            Err(cause) => return Err(reservation.failure(cause, &caller)),
        };
        let backend_cancel = reservation.abort.child_token();
        let request = SpawnRequest {
            id: reservation.id.clone(),
            owner: reservation.owner.clone(),
            spec: spec.clone(),
            cancel: backend_cancel.clone(),
            restore: None,
        };
        let spawned = {
            let spawning = self.inner.backend.spawn(request);
            tokio::pin!(spawning);
            tokio::select! {
                biased;
                result = &mut spawning => result,
                () = caller.cancelled() => {
                    backend_cancel.cancel();
                    // Always await the backend to its end: what it made must
                    // be rolled back, not dropped.
                    spawning.await
                }
            }
        };
        let mut retained = None;
        let (cause, half_made) = match spawned {
            Ok(terminal) => match self
                .publish(&mut reservation, &spec, &terminal, &caller)
                .await
            {
                Ok(snapshot) => return Ok(snapshot),
                Err(cause) => (cause, Some(terminal)),
            },
            Err(Error::BackendCleanup { cause, cleanup }) => {
                retained = Some(cleanup);
                (*cause, None)
            }
            Err(cause) => (cause, None),
        };
        let mut rollback = None;
        if let Some(terminal) = half_made
            && let Err(error) = terminal.close(CloseReason::RolledBack).await
        {
            let error = Arc::new(error);
            warn!(terminal = %reservation.id, error = %error, "rollback of an unpublished terminal failed");
            retained = Some(Arc::clone(&error));
            rollback = Some(error);
        }
        let cause = reservation.failure(cause, &caller);
        // Nothing was published: its lock file goes (removed while held,
        // so no reaper can take the lock of a file about to vanish).
        self.inner.store.remove_spawn_lock(&reservation.id).await;
        drop(spawn_lock);
        reservation.settle(retained);
        match rollback {
            Some(rollback) if !caller.is_cancelled() => Err(Error::RollbackFailed {
                cause: Box::new(cause),
                rollback,
            }),
            _ => Err(cause),
        }
    }

    /// Persists and publishes a spawned terminal, unless the spawn must not
    /// be published any more.
    async fn publish(
        &self,
        reservation: &mut Reservation,
        spec: &SpawnSpec,
        terminal: &Arc<dyn BackendTerminal>,
        caller: &CancellationToken,
    ) -> Result<TerminalSnapshot> {
        reservation.check_publishable(&self.inner.lock(), caller)?;
        let mut record = TerminalRecord::new(
            reservation.id.clone(),
            reservation.owner.clone(),
            self.inner.backend.kind(),
            spec.clone(),
            terminal.locator(),
        );
        record.boot_id = self.boot_id();
        // Its files before its record: a full disk fails the spawn here,
        // with the record never written (so never torn).
        let keeps = spec.keeps_history();
        if keeps && let Err(error) = self.create_history(&reservation.id).await {
            self.remove_history(&reservation.id, None).await;
            return Err(error);
        }
        if let Err(error) = self.inner.store.write(&record).await {
            if keeps {
                self.remove_history(&reservation.id, None).await;
            }
            return Err(error);
        }
        let published = {
            let mut state = self.inner.lock();
            reservation.check_publishable(&state, caller).map(|()| {
                if let Some(pending) = state.pending.remove(&reservation.key) {
                    pending.settled.cancel();
                }
                let seq = state.next();
                let entry = Entry::new(
                    record,
                    seq,
                    Presence::live(Arc::clone(terminal)),
                    self.inner.shutdown.child_token(),
                );
                let snapshot = entry.snapshot();
                let cancel = entry.cancel.clone();
                state.insert_entry(entry);
                (snapshot, cancel)
            })
        };
        match published {
            Ok((snapshot, cancel)) => {
                reservation.settled = true;
                self.warm_records();
                self.follow_history(&reservation.id, 0);
                if snapshot.restart == RestartPolicy::Always && self.inner.config.supervise {
                    self.start_restart_loop(snapshot.id.clone(), cancel);
                }
                Ok(snapshot)
            }
            Err(error) => {
                if let Err(remove) = self.inner.store.remove(&reservation.id).await {
                    warn!(terminal = %reservation.id, error = %remove, "unpublished record left behind");
                }
                if keeps {
                    self.remove_history(&reservation.id, None).await;
                }
                Err(error)
            }
        }
    }
}

/// How long after a record is written its file has settled for the state
/// directory's cache of parsed records (a second, `statedir/cache.rs`),
/// with a margin.
const WARM_AFTER: std::time::Duration = std::time::Duration::from_millis(1_200);

/// A registry knowing fewer name lock files' stamps than this learns them
/// all at its next rescan (see [`Registry::lock_name`]).
const LEARN_BELOW: usize = 512;

impl Registry {
    /// Scans the state directory every [`WARM_AFTER`] while spawns write
    /// records, and once more after the last, so the cache of parsed
    /// records keeps up with this registry's spawns: a named spawn rescans
    /// seldom (see [`lock_name`](Self::lock_name)), and the first list
    /// after a burst of 1,000 spawns read and parsed every record (39.8 ms
    /// of serve's CPU, 7.8 when every spawn rescanned). One scan a second
    /// at most, whatever the spawn rate.
    fn warm_records(&self) {
        use std::sync::atomic::Ordering;
        self.inner.written.fetch_add(1, Ordering::AcqRel);
        if !self.inner.store.is_shared() || self.inner.warming.swap(true, Ordering::AcqRel) {
            return;
        }
        let inner = Arc::downgrade(&self.inner);
        let shutdown = self.inner.shutdown.clone();
        self.inner.tasks.spawn(async move {
            loop {
                let Some(written) = inner
                    .upgrade()
                    .map(|inner| inner.written.load(Ordering::Acquire))
                else {
                    return;
                };
                tokio::select! {
                    () = tokio::time::sleep(WARM_AFTER) => {}
                    () = shutdown.cancelled() => return,
                }
                let Some(inner) = inner.upgrade() else {
                    return;
                };
                // Only the cache matters: a failed scan leaves it as it was.
                let _ = inner.store.load_all().await;
                // Every record had settled by this scan: it kept them all.
                // A spawn that found the task still running left the next
                // scan to it, so look once more after letting it go.
                if inner.written.load(Ordering::Acquire) == written {
                    inner.warming.store(false, Ordering::Release);
                    if inner.written.load(Ordering::Acquire) == written
                        || inner.warming.swap(true, Ordering::AcqRel)
                    {
                        return;
                    }
                }
            }
        });
    }

    /// Takes the lock of `owner`'s name `name` in the state directory and
    /// brings the entries in line with every record of that name, for a
    /// check of it under the lock; `None` without a state directory.
    ///
    /// The entries are brought in line by a rescan, unless the lock file's
    /// stamp is where this registry left it (no other process wrote a
    /// record with such a name since: `statedir/locks.rs`) and no entry has
    /// the name (another process may have killed or renamed it away since,
    /// which moves no stamp); `rescan` asks for one all the same.
    ///
    /// # Errors
    ///
    /// `IO` when the lock cannot be taken or stamped; the rescan's errors.
    pub(super) async fn lock_name(
        &self,
        owner: &OwnerId,
        name: &str,
        rescan: bool,
    ) -> Result<Option<FileLock>> {
        let file = StateDir::name_lock(owner, name);
        let Some((lock, stamp)) = self.inner.store.lock_name(file.clone()).await? else {
            return Ok(None);
        };
        let seen = || {
            let names = self.inner.names_seen.lock();
            names.unwrap_or_else(PoisonError::into_inner)
        };
        let known = seen().stamps.get(&file) == Some(&stamp);
        let complete = if rescan || !known || self.inner.lock().name_taken(owner, name) {
            // A registry that rescans a second time lives on: it learns every
            // name's stamp before this rescan (a thousand small reads, once),
            // so a name it has not checked yet needs none either.
            let learn = {
                let mut seen = seen();
                seen.rescans += 1;
                seen.rescans >= 2 && seen.stamps.len() < LEARN_BELOW
            };
            let learnt = if learn {
                self.inner.store.name_stamps().await
            } else {
                Vec::new()
            };
            // A file that could not be read may hold a name: the next checks
            // look again.
            let complete = self.refresh().await?.unreadable.is_empty();
            if complete {
                seen().stamps.extend(learnt);
            }
            complete
        } else {
            true
        };
        match lock.done_stamp().filter(|_| complete) {
            Some(done) => seen().stamps.insert(file, done),
            None => seen().stamps.remove(&file),
        };
        Ok(Some(lock))
    }
}

/// An unpublished spawn's claim on its id and name; settles on drop.
struct Reservation {
    inner: Arc<Inner>,
    key: u64,
    id: TerminalId,
    owner: OwnerId,
    abort: CancellationToken,
    settled: bool,
}

impl Reservation {
    /// Fails when the spawn may no longer be published.
    fn check_publishable(&self, state: &State, caller: &CancellationToken) -> Result<()> {
        if caller.is_cancelled() {
            return Err(self.cancelled());
        }
        if state
            .pending
            .get(&self.key)
            .is_some_and(|pending| pending.aborted)
        {
            return Err(Error::RegistryDisposing);
        }
        state.check_active()
    }

    /// What the spawner sees for a failed spawn: its own cancellation, else
    /// the disposal that aborted it, else the failure itself.
    fn failure(&self, cause: Error, caller: &CancellationToken) -> Error {
        if caller.is_cancelled() {
            return self.cancelled();
        }
        let state = self.inner.lock();
        if state
            .pending
            .get(&self.key)
            .is_some_and(|pending| pending.aborted)
        {
            Error::RegistryDisposing
        } else {
            cause
        }
    }

    fn cancelled(&self) -> Error {
        Error::Cancelled(format!("spawn of terminal {}", self.id))
    }

    /// Ends the reservation; a retained failure keeps the pending spawn (and
    /// the owner's activity) until disposal collects it.
    fn settle(mut self, retained: Option<Arc<Error>>) {
        self.settled = true;
        settle_pending(&self.inner, self.key, retained);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.settled {
            settle_pending(&self.inner, self.key, None);
        }
    }
}

fn settle_pending(inner: &Inner, key: u64, retained: Option<Arc<Error>>) {
    let mut state = inner.lock();
    match retained {
        None => {
            if let Some(pending) = state.pending.remove(&key) {
                pending.settled.cancel();
            }
        }
        Some(failure) => {
            if let Some(pending) = state.pending.get_mut(&key) {
                pending.cleanup_failure = Some(failure);
                pending.name = None;
                pending.settled.cancel();
            }
        }
    }
}

impl Owned<'_> {
    /// Spawns a terminal for `owner` and publishes it once its backend setup
    /// succeeded and its record is written.
    ///
    /// To cancel a spawn, drop this future (e.g. lose a `select!`):
    /// unpublished setup is then aborted in the background: the backend is
    /// told through its token and any half-made terminal is closed (a
    /// rollback that fails is kept until disposal reports it). When the
    /// registry starts disposing meanwhile, the spawn fails with
    /// `REGISTRY_DISPOSING` and is rolled back the same way; a rollback
    /// that fails then is reported (`ROLLBACK_FAILED`) and kept until
    /// disposal reports it too.
    ///
    /// # Errors
    ///
    /// In the order checked: `REGISTRY_DISPOSING`, `INVALID_INPUT` (see
    /// [`SpawnSpec::validate`]), `DUPLICATE_NAME` (counting spawns in
    /// flight); then the backend's error, or the codes above.
    pub async fn spawn(self, spec: SpawnSpec) -> Result<TerminalSnapshot> {
        let (registry, owner) = (self.registry, self.owner);
        registry.inner.lock().check_active()?;
        let mut spec = spec;
        if spec.keep_history.is_none() && registry.inner.config.keep_history {
            spec.keep_history = Some(true);
        }
        // Names are unique per owner across processes sharing the state
        // directory: the name's lock is held from the check until the
        // record is written (or the spawn failed), so a spawner in another
        // process sees this one's record or waits for it.
        let name_lock = match &spec.name {
            Some(name) => registry.lock_name(owner, name, false).await?,
            None => None,
        };
        let reservation = registry.reserve(owner, &spec)?;
        // Cancelled only when this future is dropped before the task ends.
        let caller = CancellationToken::new();
        let on_drop = caller.clone().drop_guard();
        // A task, so that a caller dropping this future cannot drop the
        // backend's spawn half-way and leak what it made.
        let task = registry.inner.tasks.spawn(registry.clone().run_spawn(
            reservation,
            spec,
            caller,
            name_lock,
        ));
        let result = match task.await {
            Ok(result) => result,
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            Err(_) => Err(Error::Cancelled(
                "spawn: the runtime is shutting down".to_owned(),
            )),
        };
        on_drop.disarm();
        result
    }
}
