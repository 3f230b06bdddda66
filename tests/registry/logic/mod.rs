//! Registry logic against the stub backend: unpublished spawns
//! (`unpublished.rs`), published terminals (`published.rs`), liveness and
//! restart policies (`policy.rs`), persistence and adoption (`persist.rs`).
#![allow(clippy::unwrap_used)]

mod persist;
mod policy;
mod published;
mod unpublished;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::support::stub::{Gate, StubBackend, StubTerminal};
use futures_util::future::BoxFuture;
use tmux_engine::registry::{
    OwnerId, Registry, RegistryConfig, SendRequest, SpawnRequest, SpawnSpec, TerminalSnapshot,
};
use tmux_engine::{Error, Result};
use tokio::task::JoinHandle;

/// How long any single wait may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(10);

/// A registry of `backend`'s terminals with no state directory.
fn registry(backend: &Arc<StubBackend>) -> Registry {
    Registry::new(RegistryConfig::default(), backend.clone()).unwrap()
}

fn owner(name: &str) -> OwnerId {
    OwnerId::new(name).unwrap()
}

/// A registry of a plain stub backend.
fn with_stub() -> (Registry, Arc<StubBackend>) {
    let backend = StubBackend::new();
    (registry(&backend), backend)
}

/// Makes `backend`'s spawns wait for the returned gate.
fn gate_spawns(backend: &StubBackend) -> Gate {
    let gate = Gate::new();
    backend.set_spawn_gate(Some(gate.clone()));
    gate
}

/// Spawns `spec` for `owner` with no cancellation; it must succeed.
async fn spawned(registry: &Registry, owner: &OwnerId, spec: SpawnSpec) -> TerminalSnapshot {
    registry.owner(owner).spawn(spec).await.unwrap()
}

/// The error of a spawn of `spec` for `owner`, with no cancellation, that
/// must fail.
async fn spawn_error(registry: &Registry, owner: &OwnerId, spec: SpawnSpec) -> Error {
    failure(registry.owner(owner).spawn(spec).await)
}

/// `error` is the registry's `CLEANUP_FAILED` aggregate.
fn assert_cleanup_failed(error: &Error) {
    assert_eq!(error.code(), "CLEANUP_FAILED");
    assert!(
        error
            .to_string()
            .contains("failed to clean up registry lifecycle"),
        "{error}"
    );
}

/// Awaits `future`, failing the test after [`DEADLINE`].
async fn within<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(DEADLINE, future)
        .await
        .expect("timed out waiting")
}

/// The error of a result that must have failed.
fn failure<T: std::fmt::Debug>(result: Result<T>) -> Error {
    result.expect_err("expected an error")
}

/// A backend whose spawns wait for `gate` (ignoring cancellation), then
/// return `terminal`.
fn gated(gate: &Gate, terminal: &Arc<StubTerminal>) -> Arc<StubBackend> {
    let gate = gate.clone();
    let terminal = Arc::clone(terminal);
    StubBackend::with_spawn(move |_request| {
        let gate = gate.clone();
        let terminal = Arc::clone(&terminal);
        Box::pin(async move {
            gate.wait().await;
            Ok(terminal)
        })
    })
}

/// A backend whose spawns open `started`, wait for their cancellation
/// token, then fail with whatever `on_cancel` builds.
fn abortable(
    started: &Gate,
    on_cancel: impl Fn() -> Error + Send + Sync + 'static,
) -> Arc<StubBackend> {
    let started = started.clone();
    let on_cancel = Arc::new(on_cancel);
    StubBackend::with_spawn(move |request: SpawnRequest| {
        let started = started.clone();
        let on_cancel = Arc::clone(&on_cancel);
        let spawn: BoxFuture<'static, Result<Arc<StubTerminal>>> = Box::pin(async move {
            started.open();
            request.cancel.cancelled().await;
            Err(on_cancel())
        });
        spawn
    })
}

/// An I/O error with `message`, as backends report their own failures.
fn backend_error(message: &str) -> Error {
    Error::io("stub backend", std::io::Error::other(message.to_owned()))
}

/// Spawns in a task, so the test can act while the spawn is pending.
/// Aborting the task drops the spawn: the caller's way to cancel it.
pub(crate) fn spawn_task(
    registry: &Registry,
    owner: &OwnerId,
    spec: SpawnSpec,
) -> JoinHandle<Result<TerminalSnapshot>> {
    let (registry, owner) = (registry.clone(), owner.clone());
    tokio::spawn(async move { registry.owner(&owner).spawn(spec).await })
}

/// Spawns in a task, then waits for `started` (the backend has the spawn).
pub(crate) async fn started_spawn_task(
    registry: &Registry,
    owner: &OwnerId,
    spec: SpawnSpec,
    started: impl Future,
) -> JoinHandle<Result<TerminalSnapshot>> {
    let pending = spawn_task(registry, owner, spec);
    within(started).await;
    pending
}

/// The error a spawn task that must fail ended with.
async fn spawn_task_error(pending: JoinHandle<Result<TerminalSnapshot>>) -> Error {
    failure(within(pending).await.unwrap())
}

pub(crate) fn dispose_task(registry: &Registry) -> JoinHandle<Result<()>> {
    let registry = registry.clone();
    tokio::spawn(async move { registry.dispose().await })
}

/// Cancels a spawn task by dropping its spawn, and checks it ended so.
async fn cancel_spawn_task(pending: JoinHandle<Result<TerminalSnapshot>>) {
    pending.abort();
    assert!(within(pending).await.unwrap_err().is_cancelled());
}

/// Waits until `owner` has nothing in `backend`'s hands (no spawn running,
/// every terminal closed or at least asked to): a dropped spawn settles in
/// the background. The stub's close answers at once, so on the tests'
/// single-threaded runtime the registry has settled too when this returns.
async fn settled(backend: &StubBackend, owner: &OwnerId) {
    within(async {
        while backend.has_activity(owner) {
            tokio::task::yield_now().await;
        }
    })
    .await;
}

fn send(text: &'static str) -> SendRequest {
    SendRequest {
        text: text.into(),
        submit: true,
        ..SendRequest::default()
    }
}

/// The failures carried by a `CLEANUP_FAILED` or `CLOSE_FAILED` error.
fn failures(error: &Error) -> Vec<Arc<Error>> {
    match error {
        Error::CleanupFailed { failures } | Error::CloseFailed { failures } => failures.clone(),
        other => panic!("not an aggregate: {other}"),
    }
}
