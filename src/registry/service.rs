//! The [`Registry`] handle, its setup ([`RegistryConfig`], [`RestartBackoff`]),
//! its owner-scoped [`Owned`] view and the shared state behind both.
//!
//! The other verbs live beside it: `ops.rs` (send, read, list, ...),
//! `lifecycle.rs` (kill, disposal), `liveness.rs` (probe, recreation),
//! `adopt.rs` (state directory scans).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::OwnerId;
use super::seam::{Backend, TerminalStatus};
use super::state::State;
use crate::Result;
use crate::statedir::StateDir;
use crate::statedir::Store;

/// The owner-scoped registry of terminals.
///
/// Cheap to clone; clones share one registry, and one backend fixed when
/// it was built. Only [`kill`](Owned::kill) and
/// [`dispose`](Registry::dispose) close terminals. To let go of them
/// instead (they outlive the engine and are re-adopted by
/// [`Registry::open`]), await [`shutdown`](Registry::shutdown): it resolves
/// once every background task has stopped and every terminal's local
/// resources (for tmux, its control connection) are released. Dropping
/// every clone lets go the same way, but in the background: a program that
/// exits right after would cut its control connections off mid-detach (see
/// [`ClientOptions::handshake_lock`](crate::control::client::ClientOptions::handshake_lock)).
///
/// Every call that touches a terminal goes through an owner's handle
/// ([`owner`](Registry::owner)), which fences it to that owner.
#[derive(Clone)]
pub struct Registry {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("state_dir", &self.inner.store.dir().map(StateDir::root))
            .finish_non_exhaustive()
    }
}

/// The registry as one owner uses it, from [`Registry::owner`]: every
/// verb here is fenced to that owner (another owner's terminal is
/// `FOREIGN_TERMINAL`, an unknown one `NO_TERMINAL`), and addresses a
/// terminal by its id or by its name within the owner (names first).
#[derive(Debug, Clone, Copy)]
pub struct Owned<'a> {
    pub(crate) registry: &'a Registry,
    pub(crate) owner: &'a OwnerId,
    /// Whether a use through this handle may start a program: bring a
    /// dead `on-attach` terminal back ([`Owned::revive`]). A read-only
    /// principal's handle may not ([`Owned::read_only`]).
    pub(crate) starts: bool,
}

impl<'a> Owned<'a> {
    /// The owner this handle acts for.
    pub fn id(&self) -> &OwnerId {
        self.owner
    }

    /// The same handle for a principal that only watches (a read-only
    /// token or share link, `mcp --read-only`): its reads and waits never
    /// recreate a dead `on-attach` terminal, since that starts its
    /// program again (docs/threat-model.md).
    #[must_use]
    pub fn read_only(self) -> Owned<'a> {
        Owned {
            starts: false,
            ..self
        }
    }

    /// Whether this handle may start a program (see [`Owned::read_only`]).
    pub fn starts_programs(&self) -> bool {
        self.starts
    }
}

/// Backoff of the `always` restart policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RestartBackoff {
    /// Delay before the first recreation after a death.
    pub initial: Duration,
    /// Longest delay; each consecutive recreation doubles the delay up to it.
    pub max_delay: Duration,
    /// Consecutive recreations after which the registry gives up and leaves
    /// the terminal dead.
    pub max_restarts: u32,
    /// A terminal that ran this long before dying resets the count.
    pub stable_after: Duration,
}

impl Default for RestartBackoff {
    fn default() -> Self {
        RestartBackoff {
            initial: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_restarts: 10,
            stable_after: Duration::from_secs(60),
        }
    }
}

impl RestartBackoff {
    /// A backoff with these bounds.
    pub fn new(
        initial: Duration,
        max_delay: Duration,
        max_restarts: u32,
        stable_after: Duration,
    ) -> Self {
        RestartBackoff {
            initial,
            max_delay,
            max_restarts,
            stable_after,
        }
    }

    /// The delay before recreation number `attempt` (zero-based):
    /// `initial * 2^attempt`, at most `max_delay`.
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt).unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max_delay)
    }
}

/// How a [`Registry`] is set up.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RegistryConfig {
    /// Where terminal records live; `None` keeps everything in memory (no
    /// restart survival).
    pub state_dir: Option<PathBuf>,
    /// Backoff of the `always` restart policy.
    pub backoff: RestartBackoff,
    /// Whether this registry runs `always` restart loops (default `true`).
    /// Even then, of the processes sharing a state directory only one runs
    /// a given terminal's loop at a time (a `flock`). A one-shot process
    /// (each CLI command) turns it off: it would adopt every `always`
    /// terminal only to exit a moment later.
    pub supervise: bool,
    /// Whether a spawn that does not say keeps its history on disk
    /// (`serve --keep-history`, `mcp --keep-history`).
    pub keep_history: bool,
    /// The byte limit of one terminal's kept history.
    pub history_bytes: u64,
    /// Where the machine's boot id is read (default
    /// `/proc/sys/kernel/random/boot_id`): a test seam, so a test can
    /// "reboot" by changing what it says.
    pub boot_id_file: Option<PathBuf>,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            state_dir: None,
            backoff: RestartBackoff::default(),
            supervise: true,
            keep_history: false,
            history_bytes: crate::history::DEFAULT_HISTORY_BYTES,
            boot_id_file: None,
        }
    }
}

impl RegistryConfig {
    /// Sets the state directory.
    #[must_use]
    pub fn state_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.state_dir = Some(dir.into());
        self
    }

    /// Sets the backoff of the `always` restart policy.
    #[must_use]
    pub fn backoff(mut self, backoff: RestartBackoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Sets whether this registry runs `always` restart loops (see
    /// [`RegistryConfig::supervise`]).
    #[must_use]
    pub fn supervise(mut self, supervise: bool) -> Self {
        self.supervise = supervise;
        self
    }

    /// Sets whether spawns keep their history by default (see
    /// [`RegistryConfig::keep_history`]).
    #[must_use]
    pub fn keep_history(mut self, keep: bool) -> Self {
        self.keep_history = keep;
        self
    }

    /// Sets the byte limit of one terminal's kept history.
    #[must_use]
    pub fn history_bytes(mut self, bytes: u64) -> Self {
        self.history_bytes = bytes;
        self
    }

    /// Reads the boot id from `path` instead of the kernel's (a test seam).
    #[must_use]
    pub fn boot_id_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.boot_id_file = Some(path.into());
        self
    }
}

/// The shared part of a [`Registry`].
pub(crate) struct Inner {
    state: Mutex<State>,
    pub(crate) store: Store,
    pub(crate) config: RegistryConfig,
    /// What runs the terminals; one per registry, fixed when it is built.
    pub(crate) backend: Arc<dyn Backend>,
    /// Cancelled by `dispose` or when the last handle drops; stops every
    /// background task.
    pub(crate) shutdown: CancellationToken,
    pub(crate) tasks: TaskTracker,
    /// Cancelled once `dispose` or `shutdown` has finished, for a second
    /// `shutdown` to wait on.
    pub(crate) stopped: CancellationToken,
    /// Serializes scans of the state directory; holds the last scan the
    /// entries were brought in line with and `State::changes` then (see
    /// `Registry::refresh`).
    pub(crate) scan: tokio::sync::Mutex<Option<(Arc<crate::statedir::LoadedRecords>, u64)>>,
    /// The name lock files' stamps this registry's entries are in line
    /// with (`Registry::lock_name`).
    pub(crate) names_seen: Mutex<NamesSeen>,
    /// A task scans the state directory to keep its parsed records warm
    /// (`Registry::warm_records`), and the count of records written for it.
    pub(crate) warming: std::sync::atomic::AtomicBool,
    pub(crate) written: std::sync::atomic::AtomicU64,
}

/// The stamp of each name lock file (by file name) this registry's
/// entries were last brought in line with every record of its names, and
/// how many rescans a name's check needed: a named spawn that finds the
/// stamp where it was rescans nothing (`statedir/locks.rs`).
#[derive(Debug, Default)]
pub(crate) struct NamesSeen {
    pub(crate) stamps: std::collections::HashMap<String, u64>,
    pub(crate) rescans: u64,
}

impl Inner {
    /// Locks the maps; a panic while they were locked left them consistent
    /// (no code path unwinds half-way through an update), so poison is
    /// ignored.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Registry {
    /// Caps the terminals one owner may have (those being spawned
    /// included) at `max`: a spawn past it fails with
    /// `TOO_MANY_TERMINALS`, so one owner cannot spend the file
    /// descriptors every other owner's spawns need. `None` lifts the cap.
    pub fn limit_terminals_per_owner(&self, max: Option<usize>) {
        self.inner.lock().max_per_owner = max;
    }

    /// A registry with `config` whose terminals `backend` runs, with no
    /// terminals yet.
    ///
    /// With a state directory, new terminals are persisted there; call
    /// [`refresh`](Registry::refresh) (or use
    /// [`open_with`](Registry::open_with)) to adopt the terminals already
    /// recorded.
    ///
    /// # Errors
    ///
    /// [`Error::Io`](crate::Error::Io) when the state directory cannot be created.
    pub fn new(config: RegistryConfig, backend: Arc<dyn Backend>) -> Result<Self> {
        let store = Store::new(config.state_dir.clone().map(StateDir::open).transpose()?);
        Ok(Registry {
            inner: Arc::new(Inner {
                state: Mutex::new(State::default()),
                store,
                config,
                backend,
                shutdown: CancellationToken::new(),
                tasks: TaskTracker::new(),
                stopped: CancellationToken::new(),
                scan: tokio::sync::Mutex::new(None),
                names_seen: Mutex::default(),
                warming: std::sync::atomic::AtomicBool::new(false),
                written: std::sync::atomic::AtomicU64::new(0),
            }),
        })
    }

    /// The registry's verbs on behalf of `owner`:
    /// `registry.owner(&me).send(target, request)`.
    pub fn owner<'a>(&'a self, owner: &'a OwnerId) -> Owned<'a> {
        Owned {
            registry: self,
            owner,
            starts: true,
        }
    }

    /// The state directory, if the registry persists terminals.
    pub fn state_dir(&self) -> Option<&StateDir> {
        self.inner.store.dir()
    }

    /// How many terminals of every owner this process knows, by status,
    /// without a rescan of the state directory: `serve`'s metrics, read on
    /// every scrape, so one lock and no I/O.
    pub fn census(&self) -> Census {
        let state = self.inner.lock();
        let mut census = Census::default();
        for entry in state.entries.values() {
            match entry.status() {
                TerminalStatus::Running => census.running += 1,
                TerminalStatus::Exited { .. } => census.exited += 1,
                TerminalStatus::Gone { .. } => census.gone += 1,
            }
        }
        census
    }

    /// What the backend says of its health and pool ([`Backend::health`]).
    pub fn backend_health(&self) -> super::BackendHealth {
        self.inner.backend.health()
    }

    /// Whether the registry is disposing (or disposed): it takes no more
    /// calls.
    pub fn is_disposing(&self) -> bool {
        self.inner.lock().check_active().is_err()
    }
}

/// Terminals by status ([`Registry::census`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Census {
    /// Their program runs.
    pub running: usize,
    /// Their program ended; the pane is kept.
    pub exited: usize,
    /// Their server or session is gone.
    pub gone: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let backoff = RestartBackoff::new(
            Duration::from_millis(100),
            Duration::from_secs(1),
            5,
            Duration::from_secs(10),
        );
        let delays: Vec<u128> = (0..6).map(|n| backoff.delay(n).as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(backoff.delay(40), Duration::from_secs(1));
    }
}
