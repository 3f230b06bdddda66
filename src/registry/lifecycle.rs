//! Ending terminals: `kill` and registry disposal; and
//! ending the registry without ending its terminals: `shutdown`.
//!
//! A close runs as a task, shared by everyone who joins it: a kill that
//! finds a close in flight awaits that one. Only a successful close removes
//! the terminal and its record; a failed one keeps both for a retry.
//! Disposal attempts every terminal even when some fail, clears the maps
//! even on failure, and reports every failure together.

use std::sync::{Arc, Weak};

use futures_util::FutureExt;
use futures_util::future::join_all;
use tracing::warn;

use super::seam::{Backend, BackendTerminal, CloseReason};
use super::service::Inner;
use super::service::Owned;
use super::state::Closing;
use super::{Registry, TerminalId};
use crate::statedir::Purpose;
use crate::statedir::StateDir;
use crate::statedir::Store;
use crate::statedir::TerminalRecord;
use crate::{Error, Result};

impl Registry {
    /// Disposes the registry: aborts and awaits every unpublished spawn,
    /// closes every terminal, clears every map (even when something
    /// failed), stops background tasks and waits for them. Afterwards every
    /// call fails with `REGISTRY_DISPOSING`.
    ///
    /// Must not be awaited from inside a backend's spawn (it waits for that
    /// spawn).
    ///
    /// # Errors
    ///
    /// `REGISTRY_DISPOSING` when disposal already began, or
    /// `CLEANUP_FAILED` carrying every failed rollback and close; terminals
    /// that failed to close keep their records, so a later
    /// [`open`](Registry::open) finds them again.
    pub async fn dispose(&self) -> Result<()> {
        {
            let mut state = self.inner.lock();
            state.check_active()?;
            state.disposing = true;
        }
        let mut failures = self.abort_pending().await;
        let ids = self.all_ids();
        if let Err(error) = self
            .close_entries(&ids, &CloseReason::RegistryDisposed)
            .await
        {
            failures.push(Arc::new(error));
        }
        let kept = self.clear();
        self.inner.shutdown.cancel();
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
        // Terminals that failed to close stay running; let go of them.
        join_all(kept.iter().map(|terminal| terminal.shutdown())).await;
        self.inner.stopped.cancel();
        cleanup_result(failures)
    }

    /// Shuts the registry down without ending its terminals: unpublished
    /// spawns are aborted and rolled back, background tasks (`always`
    /// restart loops, sends and closes in flight, scans) stop and are
    /// awaited, and every terminal's local resources are released through
    /// [`BackendTerminal::shutdown`] (for tmux: the watcher stops and the
    /// control client detaches; the server keeps running). Resolves when
    /// all of that is done, so a program may exit right after.
    ///
    /// Records stay in the state directory: a later
    /// [`open`](Registry::open) adopts the terminals again. Afterwards every
    /// call fails with `REGISTRY_DISPOSING`; a second `shutdown` (or one
    /// during [`dispose`](Registry::dispose)) waits for the first to finish.
    ///
    /// Must not be awaited from inside a backend's spawn (it waits for that
    /// spawn).
    ///
    /// [`BackendTerminal::shutdown`]: super::BackendTerminal::shutdown
    pub async fn shutdown(&self) {
        let first = {
            let mut state = self.inner.lock();
            !std::mem::replace(&mut state.disposing, true)
        };
        if !first {
            self.inner.stopped.cancelled().await;
            return;
        }
        // A scan in flight sees `disposing` and stops; wait for it, so the
        // terminal it may be adopting is not left behind.
        drop(self.inner.scan.lock().await);
        for failure in self.abort_pending().await {
            warn!(error = %failure, "rollback of an unpublished terminal failed");
        }
        self.inner.shutdown.cancel();
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
        let terminals = self.clear();
        join_all(terminals.iter().map(|terminal| terminal.shutdown())).await;
        self.inner.stopped.cancel();
    }

    /// Empties every map, stopping each entry's tasks; returns the live
    /// terminals that were in it.
    fn clear(&self) -> Vec<Arc<dyn BackendTerminal>> {
        let mut state = self.inner.lock();
        state.pending.clear();
        state
            .entries
            .drain()
            .filter_map(|(_, entry)| {
                entry.cancel.cancel();
                entry.presence.into_terminal()
            })
            .collect()
    }

    /// Ids of every terminal.
    fn all_ids(&self) -> Vec<TerminalId> {
        self.inner.lock().entries.keys().cloned().collect()
    }

    /// Closes each terminal of `ids`, concurrently, joining closes in
    /// flight; returns how many this call closed.
    pub(crate) async fn close_entries(
        &self,
        ids: &[TerminalId],
        reason: &CloseReason,
    ) -> Result<usize> {
        let results = join_all(ids.iter().map(|id| self.close_entry(id, reason.clone()))).await;
        let mut closed = 0;
        let mut failures = Vec::new();
        for result in results {
            match result {
                Ok(true) => closed += 1,
                Ok(false) => {}
                Err(failure) => failures.push(failure),
            }
        }
        if failures.is_empty() {
            Ok(closed)
        } else {
            Err(Error::CloseFailed { failures })
        }
    }

    /// Closes one terminal, or joins the close in flight. `Ok(true)` when
    /// this call started the close that succeeded.
    pub(crate) async fn close_entry(
        &self,
        id: &TerminalId,
        reason: CloseReason,
    ) -> Result<bool, Arc<Error>> {
        let (future, started) = {
            let mut state = self.inner.lock();
            let generation = state.next();
            let Some(entry) = state.entries.get_mut(id) else {
                return Ok(false);
            };
            match &entry.closing {
                Some(closing) => (closing.future.clone(), false),
                None => {
                    let close = Close {
                        inner: Arc::downgrade(&self.inner),
                        id: id.clone(),
                        generation,
                        terminal: entry.presence.terminal(),
                        record: entry.record.clone(),
                    };
                    // A task, so the close finishes (and its bookkeeping
                    // runs) even if every caller stops waiting.
                    let task = self.inner.tasks.spawn(close.run(
                        Arc::clone(&self.inner.backend),
                        self.inner.store.clone(),
                        reason,
                    ));
                    let future = async move {
                        task.await.unwrap_or_else(|error| {
                            Err(Arc::new(Error::io(
                                "closing a terminal",
                                std::io::Error::other(error),
                            )))
                        })
                    }
                    .boxed()
                    .shared();
                    entry.closing = Some(Closing {
                        generation,
                        future: future.clone(),
                    });
                    (future, true)
                }
            }
        };
        future.await.map(|()| started)
    }

    /// Aborts every unpublished spawn, waits until each has settled, and
    /// collects the failures they kept: those of earlier spawns as well.
    async fn abort_pending(&self) -> Vec<Arc<Error>> {
        let waits: Vec<_> = {
            let mut state = self.inner.lock();
            state
                .pending
                .iter_mut()
                .map(|(key, pending)| {
                    pending.aborted = true;
                    pending.abort.cancel();
                    (*key, pending.settled.clone())
                })
                .collect()
        };
        join_all(waits.iter().map(|(_, settled)| settled.cancelled())).await;
        let mut state = self.inner.lock();
        waits
            .iter()
            .filter_map(|(key, _)| state.pending.remove(key))
            .filter_map(|pending| pending.cleanup_failure)
            .collect()
    }
}

/// `Ok` without failures, else one `CLEANUP_FAILED` carrying them all.
fn cleanup_result(failures: Vec<Arc<Error>>) -> Result<()> {
    if failures.is_empty() {
        Ok(())
    } else {
        Err(Error::CleanupFailed { failures })
    }
}

impl Owned<'_> {
    /// Closes the terminal and its whole process tree, then removes it and
    /// its record.
    ///
    /// Returns `true` when this call closed it, `false` when it joined a
    /// close already in flight (or the terminal left meanwhile).
    ///
    /// # Errors
    ///
    /// `NO_TERMINAL`, `FOREIGN_TERMINAL`, `REGISTRY_DISPOSING`, or
    /// `CLOSE_FAILED` carrying the backend's error; the terminal is then
    /// kept so the kill can be retried.
    pub async fn kill(self, target: &str) -> Result<bool> {
        let (registry, owner) = (self.registry, self.owner);
        let id = registry.locate(owner, target).await?;
        registry
            .close_entry(&id, CloseReason::Kill)
            .await
            .map_err(|failure| Error::CloseFailed {
                failures: vec![failure],
            })
    }
}

/// One close of one terminal, run as a task by `close_entry`.
struct Close {
    inner: Weak<Inner>,
    id: TerminalId,
    /// Which close this is, so a failed one never clears a newer one.
    generation: u64,
    /// The live terminal, if this process holds one.
    terminal: Option<Arc<dyn BackendTerminal>>,
    record: TerminalRecord,
}

impl Close {
    async fn run(
        self,
        backend: Arc<dyn Backend>,
        store: Store,
        reason: CloseReason,
    ) -> Result<(), Arc<Error>> {
        // Not while another process recreates it: that one would write the
        // record back after ours is gone.
        let live = StateDir::terminal_lock(&self.id, Purpose::Live);
        let _live = store.lock(live).await.ok().flatten();
        let closed = match &self.terminal {
            Some(terminal) => terminal.close(reason).await,
            // Not attached here (or gone): what the record names is killed
            // without attaching.
            None => backend.retire(&self.record).await,
        };
        match closed {
            Ok(()) => {
                self.forget(&store).await;
                Ok(())
            }
            Err(error) => {
                self.keep_for_a_retry();
                Err(Arc::new(error))
            }
        }
    }

    /// After a successful close: the terminal's locks go; its record and
    /// entry too, unless the registry itself is gone meanwhile.
    async fn forget(&self, store: &Store) {
        store.remove_locks(&self.id).await;
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        if let Err(error) = store.remove(&self.id).await {
            warn!(terminal = %self.id, error = %error, "record of a closed terminal left behind");
        }
        // Its writer stops with the entry, then (once its last write is
        // done) its kept history goes.
        let writer = inner
            .lock()
            .remove_entry(&self.id)
            .and_then(|entry| entry.history?.finished);
        if self.record.spec.keeps_history() {
            Registry { inner }.remove_history(&self.id, writer).await;
        }
    }

    /// After a failed close: the terminal stays, and may be closed again.
    fn keep_for_a_retry(&self) {
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        let mut state = inner.lock();
        if let Some(entry) = state.entries.get_mut(&self.id)
            // A retry may already own a newer close.
            && entry
                .closing
                .as_ref()
                .is_some_and(|closing| closing.generation == self.generation)
        {
            entry.closing = None;
        }
    }
}
