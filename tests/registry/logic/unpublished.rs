//! Unpublished spawns: name reservation, cancellation, rollback, and
//! disposal that aborts and awaits them and reports what their cleanup
//! left. Why a spawn was aborted reaches the spawner as its error code.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::support::stub::{Gate, StubBackend, StubTerminal};
use futures_util::poll;
use tmux_engine::registry::{CloseReason, OwnerId, Registry, SpawnSpec, TerminalSnapshot};
use tmux_engine::{Error, Result};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{
    abortable, assert_cleanup_failed, backend_error, cancel_spawn_task, dispose_task, failure,
    failures, gate_spawns, gated, owner, registry, settled, spawn_error, spawn_task_error, spawned,
    started_spawn_task, with_stub, within,
};

/// A "slow" backend whose one spawn waits for the gate, then returns a
/// terminal that rejects its close (so a rollback fails).
fn slow_rejecting_close() -> (Registry, Arc<StubBackend>, Gate, Arc<StubTerminal>) {
    let gate = Gate::new();
    let session = StubTerminal::new();
    session.set_reject_close(true);
    let backend = gated(&gate, &session);
    (registry(&backend), backend, gate, session)
}

/// A spawn of a "cleanup-failing" backend, pending in the backend: on
/// cancellation it fails with `cause` and the `cleanup` failure.
struct CleanupFailing {
    registry: Registry,
    cleanup: Arc<Error>,
    pending: JoinHandle<Result<TerminalSnapshot>>,
}

async fn cleanup_failing(cause: &'static str) -> CleanupFailing {
    let started = Gate::new();
    let cleanup = Arc::new(backend_error("backend cleanup failed"));
    let kept = Arc::clone(&cleanup);
    let backend = abortable(&started, move || Error::BackendCleanup {
        cause: Box::new(Error::Cancelled(cause.to_owned())),
        cleanup: Arc::clone(&kept),
    });
    let registry = registry(&backend);
    let owner = owner("owner");
    let spec = SpawnSpec::new();
    let pending = started_spawn_task(&registry, &owner, spec, started.wait()).await;
    CleanupFailing {
        registry,
        cleanup,
        pending,
    }
}

/// Spawns, waits for `started`, drops the spawn, then runs `then`.
async fn drop_started_spawn(
    registry: &Registry,
    owner: &OwnerId,
    started: impl Future,
    then: impl FnOnce(),
) {
    let pending = started_spawn_task(registry, owner, SpawnSpec::new(), started).await;
    cancel_spawn_task(pending).await;
    then();
}

/// `error` carries exactly one failure, `cleanup` itself.
fn assert_reports_only(error: &Error, cleanup: &Arc<Error>) {
    let reported = failures(error);
    assert_eq!(reported.len(), 1);
    assert!(Arc::ptr_eq(&reported[0], cleanup));
}

#[tokio::test]
async fn reserves_concurrent_names_and_rolls_back_a_spawn_whose_registry_is_disposed() {
    let (registry, backend) = with_stub();
    let gate = gate_spawns(&backend);
    let owner = owner("owner");

    let spec = SpawnSpec::new().name("main");
    let started = backend.wait_spawns_started(1);
    let pending = started_spawn_task(&registry, &owner, spec, started).await;
    let error = spawn_error(&registry, &owner, SpawnSpec::new().name("main")).await;
    assert_eq!(error.code(), "DUPLICATE_NAME");
    // Its first poll marks the registry disposing and aborts the spawn;
    // then it waits for the spawn to settle.
    let disposal = registry.dispose();
    tokio::pin!(disposal);
    assert!(poll!(&mut disposal).is_pending());
    gate.open();

    assert_eq!(spawn_task_error(pending).await.code(), "REGISTRY_DISPOSING");
    within(disposal).await.unwrap();
    assert_eq!(
        backend.terminal(0).unwrap().closed(),
        [CloseReason::RolledBack]
    );
    assert!(!backend.has_activity(&owner));
}

#[tokio::test]
async fn a_dropped_spawn_is_rolled_back_when_its_backend_spawn_completes() {
    let (registry, backend) = with_stub();
    let gate = gate_spawns(&backend);
    let owner = owner("owner");

    let started = backend.wait_spawns_started(1);
    drop_started_spawn(&registry, &owner, started, || gate.open()).await;
    settled(&backend, &owner).await;
    assert_eq!(
        backend.terminal(0).unwrap().closed(),
        [CloseReason::RolledBack]
    );
    // The owner is untouched and can spawn again.
    spawned(&registry, &owner, SpawnSpec::new()).await;
}

#[tokio::test]
async fn a_dropped_spawn_keeps_its_failed_rollback_for_disposal() {
    let (registry, backend, gate, session) = slow_rejecting_close();
    let owner = owner("owner");

    let started = backend.wait_spawns_started(1);
    drop_started_spawn(&registry, &owner, started, || gate.open()).await;
    // Kept until disposal collects the failure: disposal reports it.
    let error = failure(registry.dispose().await);
    assert_cleanup_failed(&error);
    assert!(error.to_string().contains("close failed"), "{error}");
    assert!(!backend.has_activity(&owner));
    assert_eq!(session.closed(), [CloseReason::RolledBack]);
}

#[tokio::test]
async fn a_dropped_spawn_settles_when_its_backend_rejects_in_response() {
    let started = Gate::new();
    let backend = abortable(&started, || backend_error("backend observed cancellation"));
    let registry = registry(&backend);
    let owner = owner("owner");

    drop_started_spawn(&registry, &owner, started.wait(), || {}).await;
    settled(&backend, &owner).await;
    registry.dispose().await.unwrap();
}

#[tokio::test]
async fn retains_a_dropped_spawns_backend_cleanup_failure_until_disposal() {
    {
        let CleanupFailing {
            registry,
            cleanup,
            pending,
            ..
        } = cleanup_failing("spawn aborted").await;
        cancel_spawn_task(pending).await;
        // Kept until disposal, which reports exactly it.
        let error = failure(registry.dispose().await);
        assert_cleanup_failed(&error);
        assert_reports_only(&error, &cleanup);
    }
}

#[tokio::test]
async fn disposal_aborts_and_awaits_unpublished_backend_setup() {
    {
        let gate = Gate::new();
        let started = Gate::new();
        let session = StubTerminal::new();
        let backend_token: Arc<Mutex<Option<CancellationToken>>> = Arc::default();
        let backend = {
            let (gate, started, session, slot) = (
                gate.clone(),
                started.clone(),
                session.clone(),
                backend_token.clone(),
            );
            StubBackend::with_spawn(move |request| {
                *slot.lock().unwrap() = Some(request.cancel.clone());
                started.open();
                let (gate, session) = (gate.clone(), session.clone());
                Box::pin(async move {
                    // Ignores its token: disposal must still wait for it.
                    gate.wait().await;
                    Ok(session)
                })
            })
        };
        let registry = registry(&backend);
        let owner = owner("owner");

        let spec = SpawnSpec::new();
        let pending = started_spawn_task(&registry, &owner, spec, started.wait()).await;
        let disposal = dispose_task(&registry);
        let token = backend_token.lock().unwrap().clone().unwrap();
        within(token.cancelled()).await;
        let disposal_settled_before_release = disposal.is_finished();
        gate.open();

        assert_eq!(spawn_task_error(pending).await.code(), "REGISTRY_DISPOSING");
        within(disposal).await.unwrap().unwrap();
        assert!(!disposal_settled_before_release);
        assert_eq!(session.closed(), [CloseReason::RolledBack]);
    }
}

#[tokio::test]
async fn reports_unpublished_rollback_failure_through_service_disposal() {
    let (registry, backend, gate, session) = slow_rejecting_close();
    let owner = owner("owner");

    let started = backend.wait_spawns_started(1);
    let pending = started_spawn_task(&registry, &owner, SpawnSpec::new(), started).await;
    let disposal = registry.dispose();
    tokio::pin!(disposal);
    assert!(poll!(&mut disposal).is_pending());
    gate.open();

    let error = spawn_task_error(pending).await;
    assert_eq!(error.code(), "ROLLBACK_FAILED");
    assert!(
        error.to_string().contains("spawn and rollback both failed"),
        "{error}"
    );
    assert!(
        error.to_string().contains("the registry is disposing"),
        "{error}"
    );
    assert_cleanup_failed(&failure(within(disposal).await));
    assert_eq!(session.closed(), [CloseReason::RolledBack]);
}

#[tokio::test]
async fn disposal_retains_backend_side_startup_cleanup_failure() {
    {
        let CleanupFailing {
            registry,
            cleanup,
            pending,
            ..
        } = cleanup_failing("aborted by the registry").await;
        let disposal = dispose_task(&registry);

        assert_eq!(spawn_task_error(pending).await.code(), "REGISTRY_DISPOSING");
        let error = failure(within(disposal).await.unwrap());
        assert_cleanup_failed(&error);
        assert!(
            error
                .to_string()
                .starts_with("failed to clean up registry lifecycle")
        );
        assert_reports_only(&error, &cleanup);
    }
}

#[tokio::test]
async fn keeps_independent_reservations_and_handles_provider_failure_before_publication() {
    let (first_gate, second_gate) = (Gate::new(), Gate::new());
    let count = Arc::new(AtomicUsize::new(0));
    let backend = {
        let (first_gate, second_gate) = (first_gate.clone(), second_gate.clone());
        StubBackend::with_spawn(move |_request| {
            let gate = if count.fetch_add(1, Ordering::SeqCst) == 0 {
                first_gate.clone()
            } else {
                second_gate.clone()
            };
            Box::pin(async move {
                gate.wait().await;
                Ok(StubTerminal::new())
            })
        })
    };
    let registry = registry(&backend);
    let owner = owner("owner");
    let (one, two) = (SpawnSpec::new().name("one"), SpawnSpec::new().name("two"));
    let started = backend.wait_spawns_started(1);
    let first = started_spawn_task(&registry, &owner, one, started).await;
    let started = backend.wait_spawns_started(2);
    let second = started_spawn_task(&registry, &owner, two, started).await;
    first_gate.open();
    let one = within(first).await.unwrap().unwrap();
    assert_eq!(one.name.as_deref(), Some("one"));
    assert!(!second.is_finished());
    second_gate.open();
    let two = within(second).await.unwrap().unwrap();
    assert_eq!(two.name.as_deref(), Some("two"));

    let throwing = StubBackend::with_spawn(|_request| {
        Box::pin(async { Err(backend_error("provider failed")) })
    });
    let failing = super::registry(&throwing);
    let error = spawn_error(&failing, &owner, SpawnSpec::new()).await;
    assert!(error.to_string().contains("provider failed"), "{error}");
    assert!(failing.owner(&owner).list().await.unwrap().is_empty());
    assert!(!throwing.has_activity(&owner));
    assert_eq!(registry.owner(&owner).list().await.unwrap().len(), 2);
}

#[tokio::test]
async fn omits_optional_pid_metadata_when_a_backend_has_no_process_id() {
    let backend =
        StubBackend::with_spawn(|_request| Box::pin(async { Ok(StubTerminal::without_pid()) }));
    let registry = registry(&backend);
    let created = spawned(&registry, &owner("owner"), SpawnSpec::new()).await;
    assert_eq!(created.pid, None);
    let json = serde_json::to_value(&created).unwrap();
    assert!(json.get("pid").is_none(), "{json}");
    assert!(json.get("name").is_none(), "{json}");
}

#[tokio::test]
async fn dropping_a_pending_spawn_cancels_it_and_rolls_back() {
    let (registry, backend) = with_stub();
    let gate = gate_spawns(&backend);
    let owner = owner("owner");
    {
        let spawn = registry.owner(&owner).spawn(SpawnSpec::new().name("main"));
        tokio::pin!(spawn);
        assert!(poll!(&mut spawn).is_pending());
        within(backend.wait_spawns_started(1)).await;
    }
    gate.open();
    settled(&backend, &owner).await;
    assert_eq!(
        backend.terminal(0).unwrap().closed(),
        [CloseReason::RolledBack]
    );
    assert!(registry.owner(&owner).list().await.unwrap().is_empty());
    // The name was released.
    backend.set_spawn_gate(None);
    spawned(&registry, &owner, SpawnSpec::new().name("main")).await;
}
