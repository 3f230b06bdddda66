//! The seed suite `000_*`, spawn half: reservation, cancellation, rollback
//! and disposal of unpublished spawns. One test per `it(...)` case, named
//! after it; `it.each` cases get one test per row.
//!
//! The seed's `AbortSignal.reason` has no counterpart on a
//! `CancellationToken`; the reason reaches the spawner as the error code.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::poll;
use tmux_engine::Error;
use tmux_engine::registry::stub::{Gate, StubBackend, StubTerminal};
use tmux_engine::registry::{CloseReason, SpawnSpec};
use tokio_util::sync::CancellationToken;

use super::{
    abortable, backend_error, dispose_task, failure, failures, gated, none, owner, registry,
    spawn_task, within,
};

#[tokio::test]
async fn reserves_concurrent_names_and_rolls_back_a_spawn_whose_owner_disappears() {
    let registry = registry();
    let backend = StubBackend::new("slow");
    let gate = Gate::new();
    backend.set_spawn_gate(Some(gate.clone()));
    let _guard = registry.register_backend(backend.clone()).unwrap();
    let owner = owner("owner");

    let pending = spawn_task(
        &registry,
        &owner,
        SpawnSpec::new("slow").name("main"),
        &none(),
    );
    within(backend.wait_spawns_started(1)).await;
    let error = failure(
        registry
            .spawn(&owner, SpawnSpec::new("slow").name("main"), &none())
            .await,
    );
    assert_eq!(error.code(), "DUPLICATE_NAME");
    // Its first poll marks the owner disposed and aborts the spawn; then it
    // waits for the spawn to settle.
    let disposal = registry.dispose_owner(&owner);
    tokio::pin!(disposal);
    assert!(poll!(&mut disposal).is_pending());
    gate.open();

    let error = failure(within(pending).await.unwrap());
    assert_eq!(error.code(), "OWNER_NOT_LIVE");
    within(disposal).await.unwrap();
    assert_eq!(
        backend.terminal(0).unwrap().closed(),
        [CloseReason::RolledBack]
    );
    assert!(!registry.has_owner_activity(&owner));
}

#[tokio::test]
async fn preserves_caller_cancellation_when_a_pending_backend_spawn_completes() {
    let registry = registry();
    let backend = StubBackend::new("slow");
    let gate = Gate::new();
    backend.set_spawn_gate(Some(gate.clone()));
    let _guard = registry.register_backend(backend.clone()).unwrap();
    let owner = owner("owner");
    let cancel = CancellationToken::new();

    let pending = spawn_task(&registry, &owner, SpawnSpec::new("slow"), &cancel);
    within(backend.wait_spawns_started(1)).await;
    cancel.cancel();
    gate.open();

    let error = failure(within(pending).await.unwrap());
    assert_eq!(error.code(), "CANCELLED");
    assert_eq!(
        backend.terminal(0).unwrap().closed(),
        [CloseReason::RolledBack]
    );
    // The owner is untouched and can spawn again.
    assert!(!registry.has_owner_activity(&owner));
    registry
        .spawn(&owner, SpawnSpec::new("slow"), &none())
        .await
        .unwrap();
}

#[tokio::test]
async fn preserves_caller_cancellation_when_unpublished_rollback_fails() {
    let registry = registry();
    let gate = Gate::new();
    let session = StubTerminal::new();
    session.set_reject_close(true);
    let backend = gated("slow", &gate, &session);
    let _guard = registry.register_backend(backend.clone()).unwrap();
    let owner = owner("owner");
    let cancel = CancellationToken::new();

    let pending = spawn_task(&registry, &owner, SpawnSpec::new("slow"), &cancel);
    within(backend.wait_spawns_started(1)).await;
    cancel.cancel();
    gate.open();

    let error = failure(within(pending).await.unwrap());
    assert_eq!(error.code(), "CANCELLED");
    assert!(registry.has_owner_activity(&owner));
    let error = failure(registry.dispose().await);
    assert_eq!(error.code(), "CLEANUP_FAILED");
    assert!(
        error
            .to_string()
            .contains("failed to clean up registry lifecycle"),
        "{error}"
    );
    assert!(error.to_string().contains("close failed"), "{error}");
    assert!(!registry.has_owner_activity(&owner));
    assert_eq!(session.closed(), [CloseReason::RolledBack]);
}

#[tokio::test]
async fn preserves_caller_cancellation_when_a_backend_rejects_in_response_to_it() {
    let registry = registry();
    let started = Gate::new();
    let backend = abortable("abortable", &started, || {
        backend_error("backend observed cancellation")
    });
    let _guard = registry.register_backend(backend).unwrap();
    let owner = owner("owner");
    let cancel = CancellationToken::new();

    let pending = spawn_task(&registry, &owner, SpawnSpec::new("abortable"), &cancel);
    within(started.wait()).await;
    cancel.cancel();

    let error = failure(within(pending).await.unwrap());
    assert_eq!(error.code(), "CANCELLED");
    assert!(!registry.has_owner_activity(&owner));
}

/// The seed's `it.each(['owner', 'service'])` "retains caller-triggered
/// backend cleanup failure until %s disposal".
async fn retains_caller_triggered_backend_cleanup_failure(owner_scope: bool) {
    let registry = registry();
    let started = Gate::new();
    let cleanup = Arc::new(backend_error("backend cleanup failed"));
    let kept = Arc::clone(&cleanup);
    let backend = abortable("cleanup-failing", &started, move || Error::BackendCleanup {
        cause: Box::new(Error::Cancelled("spawn aborted".to_owned())),
        cleanup: Arc::clone(&kept),
    });
    let _guard = registry.register_backend(backend).unwrap();
    let owner = owner("owner");
    let cancel = CancellationToken::new();

    let pending = spawn_task(
        &registry,
        &owner,
        SpawnSpec::new("cleanup-failing"),
        &cancel,
    );
    within(started.wait()).await;
    cancel.cancel();

    let error = failure(within(pending).await.unwrap());
    assert_eq!(error.code(), "CANCELLED");
    assert!(registry.has_owner_activity(&owner));
    let disposal = if owner_scope {
        registry.dispose_owner(&owner).await
    } else {
        registry.dispose().await
    };
    let error = failure(disposal);
    assert_eq!(error.code(), "CLEANUP_FAILED");
    assert!(
        error
            .to_string()
            .contains("failed to clean up registry lifecycle")
    );
    let reported = failures(&error);
    assert_eq!(reported.len(), 1);
    assert!(Arc::ptr_eq(&reported[0], &cleanup));
    assert!(!registry.has_owner_activity(&owner));
}

#[tokio::test]
async fn retains_caller_triggered_backend_cleanup_failure_until_owner_disposal() {
    retains_caller_triggered_backend_cleanup_failure(true).await;
}

#[tokio::test]
async fn retains_caller_triggered_backend_cleanup_failure_until_service_disposal() {
    retains_caller_triggered_backend_cleanup_failure(false).await;
}

/// The seed's "$scope disposal aborts and awaits unpublished backend setup".
async fn disposal_aborts_and_awaits_unpublished_backend_setup(owner_scope: bool, code: &str) {
    let registry = registry();
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
        StubBackend::with_spawn("slow", move |request| {
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
    let _guard = registry.register_backend(backend).unwrap();
    let owner = owner("owner");

    let pending = spawn_task(&registry, &owner, SpawnSpec::new("slow"), &none());
    within(started.wait()).await;
    let disposal = dispose_task(&registry, owner_scope.then_some(&owner));
    let token = backend_token.lock().unwrap().clone().unwrap();
    within(token.cancelled()).await;
    let disposal_settled_before_release = disposal.is_finished();
    gate.open();

    let error = failure(within(pending).await.unwrap());
    assert_eq!(error.code(), code);
    within(disposal).await.unwrap().unwrap();
    assert!(!disposal_settled_before_release);
    assert_eq!(session.closed(), [CloseReason::RolledBack]);
}

#[tokio::test]
async fn owner_disposal_aborts_and_awaits_unpublished_backend_setup() {
    disposal_aborts_and_awaits_unpublished_backend_setup(true, "OWNER_NOT_LIVE").await;
}

#[tokio::test]
async fn service_disposal_aborts_and_awaits_unpublished_backend_setup() {
    disposal_aborts_and_awaits_unpublished_backend_setup(false, "REGISTRY_DISPOSING").await;
}

#[tokio::test]
async fn reports_unpublished_rollback_failure_through_service_disposal() {
    let registry = registry();
    let gate = Gate::new();
    let session = StubTerminal::new();
    session.set_reject_close(true);
    let backend = gated("slow", &gate, &session);
    let _guard = registry.register_backend(backend.clone()).unwrap();
    let owner = owner("owner");

    let pending = spawn_task(&registry, &owner, SpawnSpec::new("slow"), &none());
    within(backend.wait_spawns_started(1)).await;
    let disposal = registry.dispose();
    tokio::pin!(disposal);
    assert!(poll!(&mut disposal).is_pending());
    gate.open();

    let error = failure(within(pending).await.unwrap());
    assert_eq!(error.code(), "ROLLBACK_FAILED");
    assert!(
        error.to_string().contains("spawn and rollback both failed"),
        "{error}"
    );
    assert!(
        error.to_string().contains("the registry is disposing"),
        "{error}"
    );
    let error = failure(within(disposal).await);
    assert_eq!(error.code(), "CLEANUP_FAILED");
    assert!(
        error
            .to_string()
            .contains("failed to clean up registry lifecycle")
    );
    assert_eq!(session.closed(), [CloseReason::RolledBack]);
}

/// The seed's "$scope disposal retains backend-side startup cleanup
/// failure".
async fn disposal_retains_backend_side_startup_cleanup_failure(owner_scope: bool, code: &str) {
    let registry = registry();
    let started = Gate::new();
    let cleanup = Arc::new(backend_error("backend cleanup failed"));
    let kept = Arc::clone(&cleanup);
    let backend = abortable("cleanup-failing", &started, move || Error::BackendCleanup {
        cause: Box::new(Error::Cancelled("aborted by the registry".to_owned())),
        cleanup: Arc::clone(&kept),
    });
    let _guard = registry.register_backend(backend).unwrap();
    let owner = owner("owner");

    let pending = spawn_task(
        &registry,
        &owner,
        SpawnSpec::new("cleanup-failing"),
        &none(),
    );
    within(started.wait()).await;
    let disposal = dispose_task(&registry, owner_scope.then_some(&owner));

    let error = failure(within(pending).await.unwrap());
    assert_eq!(error.code(), code);
    let error = failure(within(disposal).await.unwrap());
    assert_eq!(error.code(), "CLEANUP_FAILED");
    assert!(
        error
            .to_string()
            .starts_with("failed to clean up registry lifecycle")
    );
    let reported = failures(&error);
    assert_eq!(reported.len(), 1);
    assert!(Arc::ptr_eq(&reported[0], &cleanup));
}

#[tokio::test]
async fn owner_disposal_retains_backend_side_startup_cleanup_failure() {
    disposal_retains_backend_side_startup_cleanup_failure(true, "OWNER_NOT_LIVE").await;
}

#[tokio::test]
async fn service_disposal_retains_backend_side_startup_cleanup_failure() {
    disposal_retains_backend_side_startup_cleanup_failure(false, "REGISTRY_DISPOSING").await;
}

#[tokio::test]
async fn keeps_independent_reservations_and_handles_provider_failure_before_publication() {
    let registry = registry();
    let (first_gate, second_gate) = (Gate::new(), Gate::new());
    let count = Arc::new(AtomicUsize::new(0));
    let backend = {
        let (first_gate, second_gate) = (first_gate.clone(), second_gate.clone());
        StubBackend::with_spawn("slow", move |_request| {
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
    let _slow = registry.register_backend(backend.clone()).unwrap();
    let owner = owner("owner");
    let first = spawn_task(
        &registry,
        &owner,
        SpawnSpec::new("slow").name("one"),
        &none(),
    );
    within(backend.wait_spawns_started(1)).await;
    let second = spawn_task(
        &registry,
        &owner,
        SpawnSpec::new("slow").name("two"),
        &none(),
    );
    within(backend.wait_spawns_started(2)).await;
    first_gate.open();
    let one = within(first).await.unwrap().unwrap();
    assert_eq!(one.name.as_deref(), Some("one"));
    assert!(!second.is_finished());
    second_gate.open();
    let two = within(second).await.unwrap().unwrap();
    assert_eq!(two.name.as_deref(), Some("two"));

    let throwing = StubBackend::with_spawn("throwing", |_request| {
        Box::pin(async { Err(backend_error("provider failed")) })
    });
    let _throwing = registry.register_backend(throwing).unwrap();
    let error = failure(
        registry
            .spawn(&owner, SpawnSpec::new("throwing"), &none())
            .await,
    );
    assert!(error.to_string().contains("provider failed"), "{error}");
    assert_eq!(registry.list(&owner).await.unwrap().len(), 2);

    let _signaled = registry
        .register_backend(StubBackend::new("signaled"))
        .unwrap();
    let controller = CancellationToken::new();
    registry
        .spawn(&owner, SpawnSpec::new("signaled"), &controller)
        .await
        .unwrap();
}

#[tokio::test]
async fn omits_optional_pid_metadata_when_a_backend_has_no_process_id() {
    let registry = registry();
    let backend = StubBackend::with_spawn("virtual", |_request| {
        Box::pin(async { Ok(StubTerminal::without_pid()) })
    });
    let _guard = registry.register_backend(backend).unwrap();
    let owner = owner("owner");
    let created = registry
        .spawn(&owner, SpawnSpec::new("virtual"), &none())
        .await
        .unwrap();
    assert_eq!(created.pid, None);
    let json = serde_json::to_value(&created).unwrap();
    assert!(json.get("pid").is_none(), "{json}");
    assert!(json.get("name").is_none(), "{json}");
}

#[tokio::test]
async fn dropping_a_pending_spawn_cancels_it_and_rolls_back() {
    let registry = registry();
    let backend = StubBackend::new("slow");
    let gate = Gate::new();
    backend.set_spawn_gate(Some(gate.clone()));
    let _guard = registry.register_backend(backend.clone()).unwrap();
    let owner = owner("owner");
    let cancel = none();
    {
        let spawn = registry.spawn(&owner, SpawnSpec::new("slow").name("main"), &cancel);
        tokio::pin!(spawn);
        assert!(poll!(&mut spawn).is_pending());
        within(backend.wait_spawns_started(1)).await;
    }
    gate.open();
    let deadline = tokio::time::Instant::now() + super::DEADLINE;
    while registry.has_owner_activity(&owner) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "spawn never settled"
        );
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    assert_eq!(
        backend.terminal(0).unwrap().closed(),
        [CloseReason::RolledBack]
    );
    assert!(registry.list(&owner).await.unwrap().is_empty());
    // The name was released.
    backend.set_spawn_gate(None);
    registry
        .spawn(&owner, SpawnSpec::new("slow").name("main"), &none())
        .await
        .unwrap();
}
