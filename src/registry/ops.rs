//! The per-terminal verbs of a [`Registry`]: send, read, screen, signal and
//! list, each fenced to the terminal's exact owner.
//!
//! Backend calls happen outside the registry's lock: each verb resolves the
//! target under the lock, clones the backend terminal, and awaits it after
//! releasing the lock.

use std::sync::{Arc, Weak};

use tokio::sync::oneshot;

use super::seam::{BackendTerminal, ReadPage, ReadRequest, Screen, SendRequest};
use super::send::SendHandle;
use super::service::Inner;
use super::service::Owned;
use super::signal::{Signal, SignalDelivery};
use super::values::TerminalSnapshot;
use super::{OwnerId, Registry, TerminalId};
use crate::statedir::Purpose;
use crate::statedir::StateDir;
use crate::stream::{OutputCursor, OutputSince};
use crate::{Error, Result};

impl Registry {
    /// Resolves `target` for `owner`; on a miss, rescans the state directory
    /// once (another process may have spawned it) before answering
    /// `NO_TERMINAL`.
    pub(crate) async fn locate(&self, owner: &OwnerId, target: &str) -> Result<TerminalId> {
        let first = {
            let state = self.inner.lock();
            state.check_active()?;
            state.resolve(owner, target)
        };
        match first {
            Err(Error::NoTerminal(_)) if self.inner.store.is_shared() => {
                self.refresh().await?;
                self.inner.lock().resolve(owner, target)
            }
            other => other,
        }
    }

    /// The backend terminal behind `target`, fenced to `owner`.
    pub(crate) async fn terminal(
        &self,
        owner: &OwnerId,
        target: &str,
    ) -> Result<Arc<dyn BackendTerminal>> {
        let id = self.locate(owner, target).await?;
        self.adopt_if_needed(&id).await?;
        self.inner.lock().entry(&id)?.live_terminal()
    }
}

/// Frees the terminal for the next send, unless a newer send owns it.
fn clear_send(inner: &Weak<Inner>, id: &TerminalId, generation: u64) {
    if let Some(inner) = inner.upgrade()
        && let Some(entry) = inner.lock().entries.get_mut(id)
        && entry.active_send == Some(generation)
    {
        entry.active_send = None;
    }
}

impl Owned<'_> {
    /// Starts a send: writes `request.text` to the terminal and watches its
    /// output until `request.wait` is met.
    ///
    /// The returned handle reads the output so far, cancels, and resolves to
    /// the result. The send runs to its end even if the handle is dropped,
    /// and the terminal accepts the next send only then.
    ///
    /// # Errors
    ///
    /// `NO_TERMINAL`, `FOREIGN_TERMINAL`, `TERMINAL_CLOSING` while it is
    /// being killed, `SEND_ACTIVE` while another send runs, `TERMINAL_DEAD`
    /// when its server is gone, or the backend's failure to start.
    pub async fn send(self, target: &str, request: SendRequest) -> Result<SendHandle> {
        let (registry, owner) = (self.registry, self.owner);
        let id = registry.locate(owner, target).await?;
        // One send at a time across processes too: a send in another
        // process holds this lock to its end.
        let store = &registry.inner.store;
        let send_lock = if store.is_shared() {
            let file = StateDir::terminal_lock(&id, Purpose::Send);
            match store.try_lock(file).await? {
                Some(lock) => Some(lock),
                None => return Err(Error::SendActive(id.to_string())),
            }
        } else {
            None
        };
        registry.adopt_if_needed(&id).await?;
        let (terminal, generation) = {
            let mut state = registry.inner.lock();
            state.check_active()?;
            let generation = state.next();
            let entry = state.entry_mut(&id)?;
            if entry.closing.is_some() {
                return Err(Error::TerminalClosing(id.to_string()));
            }
            if entry.active_send.is_some() {
                return Err(Error::SendActive(id.to_string()));
            }
            let terminal = entry.live_terminal()?;
            entry.active_send = Some(generation);
            (terminal, generation)
        };
        let started = match terminal.start_send(request) {
            Ok(started) => started,
            Err(error) => {
                clear_send(&Arc::downgrade(&registry.inner), &id, generation);
                return Err(error);
            }
        };
        let (sender, receiver) = oneshot::channel();
        let inner = Arc::downgrade(&registry.inner);
        let shutdown = registry.inner.shutdown.clone();
        let operation = Arc::clone(&started.operation);
        let driven_id = id.clone();
        registry.inner.tasks.spawn(async move {
            let result = tokio::select! {
                result = started.result => result,
                () = shutdown.cancelled() => {
                    operation.cancel();
                    Err(Error::RegistryDisposing)
                }
            };
            // Free the terminal before anyone can see the result, so the
            // next send may start as soon as this one is observed done.
            clear_send(&inner, &driven_id, generation);
            drop(send_lock);
            // The caller may have dropped the handle; nothing to tell then.
            let _ = sender.send(result);
        });
        Ok(SendHandle {
            operation: started.operation,
            result: Box::pin(
                async move { receiver.await.unwrap_or(Err(Error::RegistryDisposing)) },
            ),
        })
    }

    /// Reads one bounded page of scrollback, counted from the newest line.
    ///
    /// The page is a moment's view: while the program is still printing,
    /// the line count may lag the lines by what arrived between tmux's
    /// answers (the tmux backend asks for the history size and the lines
    /// separately).
    ///
    /// # Errors
    ///
    /// `NO_TERMINAL`, `FOREIGN_TERMINAL`, `TERMINAL_DEAD` when its server is
    /// gone, or the backend's error.
    pub async fn read(self, target: &str, request: ReadRequest) -> Result<ReadPage> {
        let (registry, owner) = (self.registry, self.owner);
        match registry.terminal(owner, target).await {
            Ok(terminal) => terminal.read(request).await,
            // Gone: its kept history, rendered, is its scrollback.
            Err(error @ Error::TerminalDead { .. }) => {
                let id = registry.locate(owner, target).await?;
                match registry.kept_or_error(&id)? {
                    Some(kept) => {
                        let bytes = super::kept_read::scrollback(&kept)?;
                        Ok(super::kept_read::page_of(&bytes, &request))
                    }
                    None => Err(error),
                }
            }
            Err(error) => Err(error),
        }
    }

    /// The output from `since` to now, as far as the terminal's output
    /// stream holds it (see [`Stream::read`](crate::registry::Stream::read)).
    ///
    /// # Errors
    ///
    /// As for [`read`](Owned::read); `UNSUPPORTED` from a backend that
    /// keeps no cursors.
    pub async fn output_since(
        self,
        target: &str,
        since: Option<OutputCursor>,
    ) -> Result<OutputSince> {
        let (registry, owner) = (self.registry, self.owner);
        let terminal = match registry.terminal(owner, target).await {
            Ok(terminal) => terminal,
            // Gone: its kept history answers, cursors and all.
            Err(error @ Error::TerminalDead { .. }) => {
                let id = registry.locate(owner, target).await?;
                return registry.read_kept(&id, since)?.ok_or(error);
            }
            Err(error) => return Err(error),
        };
        let read = super::seam::stream_of(&*terminal)?.read(since);
        // A cursor from before a reboot (or a rebuild) names kept bytes.
        if read.gap == Some(crate::stream::CursorGap::Stale)
            && let Some(cursor) = since
        {
            let id = registry.locate(owner, target).await?;
            if let Some(kept) = registry.kept(&id)
                && kept.offset_of(cursor).is_some()
            {
                return kept.read(since);
            }
        }
        Ok(read)
    }

    /// The cursor at the end of the terminal's output now (`None`: its
    /// backend keeps no cursors).
    ///
    /// # Errors
    ///
    /// As for [`read`](Owned::read).
    pub async fn output_end(self, target: &str) -> Result<Option<OutputCursor>> {
        let (registry, owner) = (self.registry, self.owner);
        let terminal = match registry.terminal(owner, target).await {
            Ok(terminal) => terminal,
            Err(error @ Error::TerminalDead { .. }) => {
                let id = registry.locate(owner, target).await?;
                return match registry.kept(&id) {
                    Some(kept) => Ok(Some(OutputCursor {
                        epoch: kept.meta().epoch,
                        offset: kept.end(),
                    })),
                    None => Err(error),
                };
            }
            Err(error) => return Err(error),
        };
        Ok(terminal.stream().map(|stream| stream.end()))
    }

    /// The terminal's working directory (see
    /// [`BackendTerminal::working_directory`]): where an upload lands and
    /// where a restored terminal starts.
    ///
    /// # Errors
    ///
    /// As for [`read`](Owned::read).
    pub async fn working_directory(self, target: &str) -> Result<Option<std::path::PathBuf>> {
        let (registry, owner) = (self.registry, self.owner);
        Ok(registry.terminal(owner, target).await?.working_directory())
    }

    /// Captures the visible screen.
    ///
    /// # Errors
    ///
    /// As for [`read`](Owned::read).
    pub async fn screen(self, target: &str) -> Result<Screen> {
        let (registry, owner) = (self.registry, self.owner);
        registry.terminal(owner, target).await?.screen().await
    }

    /// Delivers `signal` to the terminal's foreground process group and
    /// returns that group.
    ///
    /// # Errors
    ///
    /// As for [`read`](Owned::read).
    pub async fn signal(self, target: &str, signal: Signal) -> Result<SignalDelivery> {
        let (registry, owner) = (self.registry, self.owner);
        registry.terminal(owner, target).await?.signal(signal).await
    }

    /// Snapshots of `owner`'s terminals in creation order.
    ///
    /// With a state directory, the directory is rescanned first, so
    /// terminals spawned or killed by other processes sharing it are
    /// included or dropped.
    ///
    /// # Errors
    ///
    /// `REGISTRY_DISPOSING`, or [`Error::Io`] when the state directory
    /// cannot be listed.
    pub async fn list(self) -> Result<Vec<TerminalSnapshot>> {
        let (registry, owner) = (self.registry, self.owner);
        registry.inner.lock().check_active()?;
        if registry.inner.store.is_shared() {
            registry.refresh().await?;
        }
        let state = registry.inner.lock();
        state.check_active()?;
        let mut entries: Vec<_> = state
            .entries
            .values()
            .filter(|entry| &entry.record.owner == owner)
            .collect();
        entries.sort_by_key(|entry| (entry.record.created_ms, entry.seq));
        Ok(entries.into_iter().map(|entry| entry.snapshot()).collect())
    }

    /// A snapshot of one terminal.
    ///
    /// # Errors
    ///
    /// `NO_TERMINAL`, `FOREIGN_TERMINAL`, `REGISTRY_DISPOSING`.
    pub async fn show(self, target: &str) -> Result<TerminalSnapshot> {
        let (registry, owner) = (self.registry, self.owner);
        let id = registry.locate(owner, target).await?;
        Ok(registry.inner.lock().entry(&id)?.snapshot())
    }
}
