//! Restarting: the policies ([`RestartPolicy`]), and the `always` one's
//! supervised loop per terminal that waits for a pushed death, backs off
//! ([`RestartBackoff`](super::RestartBackoff), set in the registry's
//! config) and recreates it ([`Registry::recreate`] in `liveness.rs`, which
//! also serves `on-attach`); one process per state directory runs it.

use std::sync::{Arc, Weak};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::service::Inner;
use super::{Registry, TerminalId};
use crate::statedir::Purpose;
use crate::statedir::StateDir;
use crate::{Error, Result};

impl Registry {
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
) -> Option<Option<crate::statedir::FileLock>> {
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
        match registry.adopt_if_needed(id).await {
            Ok(()) => return Some(lock),
            Err(Error::NoTerminal(_)) => return None,
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
