//! The registry's persistence, one async call per use: [`Store::Dir`] runs
//! the state directory's blocking file work off the async threads;
//! [`Store::Memory`], for a registry without a state directory, keeps its
//! terminals in memory only (its maps), so it persists nothing and has
//! nobody to lock against.

use std::sync::Arc;

use super::records::{LoadedRecords, StateDir, TerminalRecord};
use crate::statedir::{FileLock, Purpose};
use crate::vocab::TerminalId;
use crate::{Error, Result};

/// Where the registry's records live.
#[derive(Debug, Clone)]
pub(crate) enum Store {
    /// A state directory shared with other processes.
    Dir(StateDir),
    /// No state directory: nothing outlives the registry.
    Memory,
}

impl Store {
    pub(crate) fn new(dir: Option<StateDir>) -> Self {
        dir.map_or(Store::Memory, Store::Dir)
    }

    /// The state directory, if there is one.
    pub(crate) fn dir(&self) -> Option<&StateDir> {
        match self {
            Store::Dir(dir) => Some(dir),
            Store::Memory => None,
        }
    }

    /// Whether other processes may share (and change) the records.
    pub(crate) fn is_shared(&self) -> bool {
        matches!(self, Store::Dir(_))
    }

    /// Runs `work` on the state directory off the async threads; without
    /// one, `memory` is the answer.
    async fn on_dir<T: Send + 'static>(
        &self,
        memory: T,
        work: impl FnOnce(&StateDir) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        match self.clone() {
            Store::Dir(dir) => blocking(move || work(&dir)).await,
            Store::Memory => Ok(memory),
        }
    }

    /// Every record (see [`StateDir::load_all`]), shared with the state
    /// directory's cache; none in memory.
    pub(crate) async fn load_all(&self) -> Result<Arc<LoadedRecords>> {
        self.on_dir(Arc::default(), StateDir::load_shared).await
    }

    /// The record of `id` as another process may have rewritten it; none
    /// in memory (only callers of a shared store ask).
    pub(crate) async fn read(&self, id: &TerminalId) -> Result<Option<TerminalRecord>> {
        let id = id.clone();
        self.on_dir(None, move |dir| dir.read(&id)).await
    }

    /// Writes `record` atomically.
    pub(crate) async fn write(&self, record: &TerminalRecord) -> Result<()> {
        let record = record.clone();
        self.on_dir((), move |dir| dir.write(&record)).await
    }

    /// Removes the record of `id` (idempotent).
    pub(crate) async fn remove(&self, id: &TerminalId) -> Result<()> {
        let id = id.clone();
        self.on_dir((), move |dir| dir.remove(&id)).await
    }

    /// Removes the lock files of `id`, best effort.
    pub(crate) async fn remove_locks(&self, id: &TerminalId) {
        let id = id.clone();
        let _ = self
            .on_dir((), move |dir| {
                dir.remove_terminal_locks(&id);
                Ok(())
            })
            .await;
    }

    /// Removes the spawn lock file of an unpublished `id`, best effort.
    pub(crate) async fn remove_spawn_lock(&self, id: &TerminalId) {
        let file = StateDir::terminal_lock(id, Purpose::Spawn);
        let _ = self
            .on_dir((), move |dir| {
                dir.remove_lock(&file);
                Ok(())
            })
            .await;
    }

    /// Waits for the lock `file` (see `locks.rs`); in memory, nothing to
    /// hold.
    pub(crate) async fn lock(&self, file: String) -> Result<Option<FileLock>> {
        self.on_dir(None, move |dir| dir.lock(&file).map(Some))
            .await
    }

    /// Waits for the name lock `file` and moves its stamp on
    /// ([`FileLock::bump`]): the lock and the stamp it had. In memory,
    /// nothing to hold.
    pub(crate) async fn lock_name(&self, file: String) -> Result<Option<(FileLock, u64)>> {
        self.on_dir(None, move |dir| {
            let mut lock = dir.lock(&file)?;
            let stamp = lock.bump()?;
            Ok(Some((lock, stamp)))
        })
        .await
    }

    /// Every name lock file's even stamp ([`StateDir::name_stamps`]); none
    /// in memory.
    pub(crate) async fn name_stamps(&self) -> Vec<(String, u64)> {
        self.on_dir(Vec::new(), |dir| Ok(dir.name_stamps()))
            .await
            .unwrap_or_default()
    }

    /// Takes the lock `file` if nobody holds it: `Ok(None)` when another
    /// holds it. In memory: `Ok(None)` too, never called there.
    pub(crate) async fn try_lock(&self, file: String) -> Result<Option<FileLock>> {
        self.on_dir(None, move |dir| dir.try_lock(&file)).await
    }
}

/// Runs blocking file work off the async threads.
async fn blocking<T, F>(work: F) -> Result<T>
where
    F: FnOnce() -> Result<T> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| Error::io("running state-directory work", std::io::Error::other(error)))?
}
