//! A scriptable in-memory backend for the registry-logic tests, built on the
//! public backend seam (`registry::{Backend, BackendTerminal}`) from outside
//! the crate.
//!
//! [`StubBackend`] and [`StubTerminal`] are the registry-logic tests' double:
//! every behaviour the registry must cope with can be switched on (reject a
//! send, reject a close, hold a close or a spawn at a [`Gate`], let the
//! program exit, make the server vanish, answer probes with anything), and
//! every call is recorded for assertions. No processes, no tmux.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures_util::future::BoxFuture;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use tmux_engine::registry::{
    Backend, BackendTerminal, OwnerId, ReapReport, SpawnRequest, TerminalId, TerminalRecord,
    TerminalStatus,
};
use tmux_engine::{Error, Result};

#[path = "stub_terminal.rs"]
mod terminal;
pub use terminal::StubTerminal;

/// What snapshots call stub terminals.
pub const STUB_KIND: &str = "stub";

/// The pid stub terminals report unless made without one.
pub const STUB_PID: u32 = 123;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn stub_error(what: &str, message: &str) -> Error {
    Error::io(
        format!("stub {what}"),
        std::io::Error::other(message.to_owned()),
    )
}

/// A latch: closed until [`open`](Gate::open), then open for good.
#[derive(Debug, Clone, Default)]
pub struct Gate(CancellationToken);

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Gate::default()
    }

    /// Opens the gate, releasing every waiter.
    pub fn open(&self) {
        self.0.cancel();
    }

    /// Whether the gate is open.
    pub fn is_open(&self) -> bool {
        self.0.is_cancelled()
    }

    /// Waits until the gate is open.
    pub async fn wait(&self) {
        self.0.cancelled().await;
    }
}

/// A custom spawn: what [`StubBackend::with_spawn`] runs instead of the
/// default.
pub type SpawnHook =
    Arc<dyn Fn(SpawnRequest) -> BoxFuture<'static, Result<Arc<StubTerminal>>> + Send + Sync>;

/// A backend of [`StubTerminal`]s.
pub struct StubBackend {
    hook: Option<SpawnHook>,
    spawn_gate: Mutex<Option<Gate>>,
    terminals: Mutex<Vec<(TerminalId, OwnerId, Arc<StubTerminal>)>>,
    /// The owners of the spawns running now (one entry per spawn).
    in_flight: Mutex<Vec<OwnerId>>,
    spawned: watch::Sender<usize>,
    reaped: Mutex<Vec<TerminalId>>,
}

impl std::fmt::Debug for StubBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StubBackend").finish_non_exhaustive()
    }
}

impl StubBackend {
    /// A backend whose spawns succeed at once (or when the spawn gate
    /// opens); its terminals' kind is [`STUB_KIND`].
    pub fn new() -> Arc<Self> {
        Arc::new(StubBackend {
            hook: None,
            spawn_gate: Mutex::new(None),
            terminals: Mutex::new(Vec::new()),
            in_flight: Mutex::new(Vec::new()),
            spawned: watch::Sender::new(0),
            reaped: Mutex::new(Vec::new()),
        })
    }

    /// A backend whose spawns run `hook`; the terminals it returns are
    /// recorded like the default ones.
    pub fn with_spawn<F>(hook: F) -> Arc<Self>
    where
        F: Fn(SpawnRequest) -> BoxFuture<'static, Result<Arc<StubTerminal>>>
            + Send
            + Sync
            + 'static,
    {
        let mut backend = StubBackend::new();
        if let Some(backend) = Arc::get_mut(&mut backend) {
            backend.hook = Some(Arc::new(hook));
        }
        backend
    }

    /// Makes default spawns wait for `gate`, ignoring their cancellation
    /// token (like a backend that is slow to notice); `None` removes it.
    pub fn set_spawn_gate(&self, gate: Option<Gate>) {
        *lock(&self.spawn_gate) = gate;
    }

    /// Every terminal spawned so far, oldest first.
    pub fn terminals(&self) -> Vec<Arc<StubTerminal>> {
        lock(&self.terminals)
            .iter()
            .map(|(_, _, terminal)| Arc::clone(terminal))
            .collect()
    }

    /// The terminal spawned `index`-th (zero-based), if any.
    pub fn terminal(&self, index: usize) -> Option<Arc<StubTerminal>> {
        lock(&self.terminals)
            .get(index)
            .map(|(_, _, terminal)| Arc::clone(terminal))
    }

    /// Waits until at least `count` spawns have started.
    pub async fn wait_spawns_started(&self, count: usize) {
        let mut started = self.spawned.subscribe();
        // The sender lives in `self`, so this cannot fail while we wait.
        let _ = started.wait_for(|started| *started >= count).await;
    }

    /// The ids [`Backend::reap`] removed.
    pub fn reaped(&self) -> Vec<TerminalId> {
        lock(&self.reaped).clone()
    }

    /// Whether `owner` has a spawn running in this backend, or a terminal
    /// the registry has not tried to close (nor had reaped): what the
    /// registry holds for the owner, seen from the backend.
    pub fn has_activity(&self, owner: &OwnerId) -> bool {
        lock(&self.in_flight).contains(owner)
            || lock(&self.terminals).iter().any(|(_, of, terminal)| {
                of == owner && terminal.closed().is_empty() && !terminal.is_closed()
            })
    }

    fn record(&self, id: TerminalId, owner: OwnerId, terminal: &Arc<StubTerminal>) {
        lock(&self.terminals).push((id, owner, Arc::clone(terminal)));
    }
}

impl Backend for StubBackend {
    fn kind(&self) -> &str {
        STUB_KIND
    }

    fn spawn(&self, request: SpawnRequest) -> BoxFuture<'_, Result<Arc<dyn BackendTerminal>>> {
        self.spawned.send_modify(|started| *started += 1);
        let in_flight = InFlight::new(&self.in_flight, request.owner.clone());
        Box::pin(async move {
            let _in_flight = in_flight;
            let (id, owner) = (request.id.clone(), request.owner.clone());
            let terminal = match &self.hook {
                Some(hook) => hook(request).await?,
                None => {
                    let gate = lock(&self.spawn_gate).clone();
                    if let Some(gate) = gate {
                        gate.wait().await;
                    }
                    StubTerminal::new()
                }
            };
            self.record(id, owner, &terminal);
            Ok(terminal as Arc<dyn BackendTerminal>)
        })
    }

    fn adopt<'a>(
        &'a self,
        record: &'a TerminalRecord,
    ) -> BoxFuture<'a, Result<Option<Arc<dyn BackendTerminal>>>> {
        Box::pin(async move {
            let terminals = lock(&self.terminals);
            let found = terminals.iter().rev().find(|(id, _, terminal)| {
                *id == record.id && terminal.locator() == record.locator && !terminal.is_closed()
            });
            Ok(found.and_then(|(_, _, terminal)| {
                let alive = !matches!(terminal.status(), TerminalStatus::Gone { .. });
                alive.then(|| Arc::clone(terminal) as Arc<dyn BackendTerminal>)
            }))
        })
    }

    fn reap<'a>(
        &'a self,
        records: &'a [TerminalRecord],
        claimed: &'a [TerminalId],
    ) -> BoxFuture<'a, Result<ReapReport>> {
        Box::pin(async move {
            let mut report = ReapReport::default();
            for (id, _, terminal) in lock(&self.terminals).iter() {
                if terminal.is_closed()
                    || records.iter().any(|record| record.id == *id)
                    || claimed.contains(id)
                {
                    continue;
                }
                terminal.vanish("reaped");
                terminal.closed_ok.store(true, Ordering::SeqCst);
                lock(&self.reaped).push(id.clone());
                report.removed.push(id.to_string());
            }
            Ok(report)
        })
    }
}

/// One running spawn in [`StubBackend::has_activity`]: removed when the spawn
/// ends or is dropped (a cancelled spawn future never finishes).
struct InFlight<'a> {
    owners: &'a Mutex<Vec<OwnerId>>,
    owner: OwnerId,
}

impl<'a> InFlight<'a> {
    fn new(owners: &'a Mutex<Vec<OwnerId>>, owner: OwnerId) -> Self {
        lock(owners).push(owner.clone());
        InFlight { owners, owner }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut owners = lock(self.owners);
        if let Some(at) = owners.iter().position(|owner| *owner == self.owner) {
            owners.remove(at);
        }
    }
}
