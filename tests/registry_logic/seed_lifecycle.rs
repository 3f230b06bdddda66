//! The seed suite `000_*`, lifecycle half: backend registration, owner
//! fencing, sends, kills and disposal of published terminals. One test per
//! `it(...)` case, named after it.
//!
//! "preserves the id brand and disposes exact backend contributions" needs
//! the registry's internals and lives beside it, in `src/registry/service.rs`.

use std::sync::{Arc, Mutex};

use futures_util::poll;
use tmux_engine::Result;
use tmux_engine::registry::stub::{Gate, STUB_PID, StubBackend, StubTerminal};
use tmux_engine::registry::{
    CloseReason, OwnerId, ReadRequest, SendOutput, Signal, SpawnSpec, TerminalId, TerminalStatus,
    WaitReason,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{
    assert_cleanup_failed, dispose_task, failure, gate_spawns, none, owner, registry, send,
    spawn_error, spawned, started_spawn_task, with_stub, within,
};

#[tokio::test]
async fn rejects_empty_backend_types() {
    let registry = registry();
    let error = failure(registry.register_backend(StubBackend::new("")));
    assert_eq!(error.code(), "INVALID_INPUT");
    assert!(error.to_string().contains("must be non-empty"), "{error}");
    assert!(registry.list_backends().is_empty());
}

#[tokio::test]
async fn backend_guard_removes_its_registration_on_drop() {
    let registry = registry();
    let guard = registry.register_backend(StubBackend::new("stub")).unwrap();
    assert_eq!(guard.kind(), "stub");
    drop(guard);
    assert!(registry.list_backends().is_empty());
    registry
        .register_backend(StubBackend::new("stub"))
        .unwrap()
        .keep();
    assert_eq!(registry.list_backends(), ["stub"]);
}

#[tokio::test]
async fn publishes_only_after_spawn_and_fences_every_operation_to_the_exact_owner() {
    let (registry, backend, _guard) = with_stub("stub");
    let gate = gate_spawns(&backend);
    let (owner, foreign) = (owner("owner"), owner("foreign"));

    let spec = SpawnSpec::new("stub").name("main").cwd("/tmp");
    let started = backend.wait_spawns_started(1);
    let pending = started_spawn_task(&registry, &owner, spec, &none(), started).await;
    // Reserved but unpublished: active, yet not listed or addressable.
    assert!(registry.has_owner_activity(&owner));
    assert!(registry.list(&owner).await.unwrap().is_empty());
    assert_eq!(
        failure(registry.read(&owner, "main", ReadRequest::default()).await).code(),
        "NO_TERMINAL"
    );
    gate.open();
    let created = within(pending).await.unwrap().unwrap();

    TerminalId::parse(created.id.as_str()).unwrap();
    assert_eq!(created.name.as_deref(), Some("main"));
    assert_eq!(created.kind, "stub");
    assert_eq!(created.pid, Some(STUB_PID));
    assert_eq!(created.status, TerminalStatus::Running);
    assert!(registry.has_owner_activity(&owner));
    assert!(!registry.has_owner_activity(&foreign));
    assert_eq!(registry.list(&owner).await.unwrap(), vec![created.clone()]);
    assert!(registry.list(&foreign).await.unwrap().is_empty());

    let id = created.id.as_str();
    let read = registry.read(&foreign, id, ReadRequest::default()).await;
    let error = failure(read);
    assert_eq!(error.code(), "FOREIGN_TERMINAL");
    assert!(
        error.to_string().contains("belongs to another owner"),
        "{error}"
    );
    assert!(error.to_string().contains(id), "{error}");
    let foreign_calls = [
        failure(registry.signal(&foreign, id, Signal::Int).await),
        failure(registry.kill(&foreign, id).await),
        failure(registry.send(&foreign, id, send("x")).await),
        failure(registry.screen(&foreign, id).await),
        failure(registry.probe(&foreign, id).await),
        failure(registry.attach(&foreign, id).await),
        failure(registry.show(&foreign, id).await),
    ];
    for error in foreign_calls {
        assert_eq!(error.code(), "FOREIGN_TERMINAL", "{error}");
    }
    // Names are per owner: another owner's name is simply unknown.
    let by_name = registry
        .read(&foreign, "main", ReadRequest::default())
        .await;
    assert_eq!(failure(by_name).code(), "NO_TERMINAL");
    let unknown = registry.read(&owner, "t-1-0123456789abcdef", ReadRequest::default());
    assert_eq!(failure(unknown.await).code(), "NO_TERMINAL");
    // The owner reaches it by id and by name.
    assert_eq!(registry.show(&owner, "main").await.unwrap().id, created.id);
    assert!(backend.terminal(0).unwrap().closed().is_empty());
}

#[tokio::test]
async fn rejects_unknown_backends_non_live_owners_duplicate_names_and_active_sends() {
    let registry = registry();
    let disposed = owner("disposed");
    registry.dispose_owner(&disposed).await.unwrap();
    let error = spawn_error(&registry, &disposed, SpawnSpec::new("missing")).await;
    assert_eq!(error.code(), "OWNER_NOT_LIVE");
    let owner = owner("owner");
    let error = spawn_error(&registry, &owner, SpawnSpec::new("missing")).await;
    assert_eq!(error.code(), "NO_BACKEND");
    assert!(error.to_string().contains("missing"), "{error}");

    let backend = StubBackend::new("stub");
    let _guard = registry.register_backend(backend.clone()).unwrap();
    let created = spawned(&registry, &owner, SpawnSpec::new("stub").name("main")).await;
    let error = spawn_error(&registry, &owner, SpawnSpec::new("stub").name("")).await;
    assert_eq!(error.code(), "INVALID_INPUT");
    assert!(error.to_string().contains("must be non-empty"), "{error}");
    for bad in ["a:b", "a.b", "a\nb"] {
        let spec = SpawnSpec::new("stub").name(bad);
        let error = failure(registry.spawn(&owner, spec, &none()).await);
        assert_eq!(error.code(), "INVALID_INPUT", "{bad:?}");
    }
    let aborted = CancellationToken::new();
    aborted.cancel();
    let error = failure(
        registry
            .spawn(&owner, SpawnSpec::new("stub"), &aborted)
            .await,
    );
    assert_eq!(error.code(), "CANCELLED");
    let error = spawn_error(&registry, &owner, SpawnSpec::new("stub").name("main")).await;
    assert_eq!(error.code(), "DUPLICATE_NAME");
    assert!(error.to_string().contains("main"), "{error}");
    // Another owner may use the same name.
    registry
        .spawn(
            &OwnerId::new("other").unwrap(),
            SpawnSpec::new("stub").name("main"),
            &none(),
        )
        .await
        .unwrap();

    let id = created.id.as_str();
    let operation = registry.send(&owner, id, send("echo hi")).await.unwrap();
    let error = failure(registry.send(&owner, id, send("pwd")).await);
    assert_eq!(error.code(), "SEND_ACTIVE");
    assert_eq!(
        operation.read_output(),
        SendOutput {
            text: "delta".to_owned(),
            bytes: "delta".into(),
            truncated: false
        }
    );
    assert!(operation.cancel());
    assert!(!operation.cancel());
    let result = within(operation.result()).await.unwrap();
    assert_eq!(result.wait_reason, WaitReason::Cancelled);
    let next = registry.send(&owner, "main", send("pwd")).await.unwrap();
    next.cancel();
    within(next.result()).await.unwrap();

    let terminal = backend.terminal(0).unwrap();
    assert_eq!(terminal.sent().len(), 2);
    terminal.set_reject_send(true);
    let rejected = registry.send(&owner, id, send("bad")).await.unwrap();
    let error = failure(within(rejected.result()).await);
    assert!(error.to_string().contains("send failed"), "{error}");
    // A failed send frees the terminal too.
    terminal.set_reject_send(false);
    let after = registry.send(&owner, id, send("ok")).await.unwrap();
    assert!(terminal.finish_send());
    assert_eq!(
        within(after.result()).await.unwrap().wait_reason,
        WaitReason::Idle
    );
}

#[tokio::test]
async fn reports_rollback_and_close_failures_without_publishing_false_success() {
    let registry = registry();
    let owner = owner("owner");
    let failed_spawn = StubTerminal::new();
    failed_spawn.set_reject_close(true);
    let owner_disposal: Arc<Mutex<Option<JoinHandle<Result<()>>>>> = Arc::default();
    let backend = {
        let (registry, owner, failed_spawn, slot) = (
            registry.clone(),
            owner.clone(),
            failed_spawn.clone(),
            owner_disposal.clone(),
        );
        StubBackend::with_spawn("bad-spawn", move |request| {
            // The owner goes away while its spawn is in the backend.
            *slot.lock().unwrap() = Some(dispose_task(&registry, Some(&owner)));
            let failed_spawn = failed_spawn.clone();
            Box::pin(async move {
                request.cancel.cancelled().await;
                Ok(failed_spawn)
            })
        })
    };
    let _bad_spawn = registry.register_backend(backend).unwrap();
    let error = spawn_error(&registry, &owner, SpawnSpec::new("bad-spawn")).await;
    assert_eq!(error.code(), "ROLLBACK_FAILED");
    assert!(
        error.to_string().contains("spawn and rollback both failed"),
        "{error}"
    );
    let disposal = owner_disposal.lock().unwrap().take().unwrap();
    let error = failure(within(disposal).await.unwrap());
    assert_cleanup_failed(&error);
    assert!(registry.list(&owner).await.unwrap().is_empty());

    let next_owner = OwnerId::new("next").unwrap();
    let backend = StubBackend::new("bad-close");
    let _bad_close = registry.register_backend(backend.clone()).unwrap();
    let created = spawned(&registry, &next_owner, SpawnSpec::new("bad-close")).await;
    backend.terminal(0).unwrap().set_reject_close(true);
    let error = failure(registry.kill(&next_owner, created.id.as_str()).await);
    assert_eq!(error.code(), "CLOSE_FAILED");
    assert!(error.to_string().contains("close failed"), "{error}");
    assert_eq!(registry.list(&next_owner).await.unwrap().len(), 1);
    // Kept for a retry, which works once the backend lets it.
    backend.terminal(0).unwrap().set_reject_close(false);
    assert!(
        registry
            .kill(&next_owner, created.id.as_str())
            .await
            .unwrap()
    );
    assert!(registry.list(&next_owner).await.unwrap().is_empty());
}

#[tokio::test]
async fn joins_an_already_running_close_and_refuses_new_sends_while_closing() {
    let (registry, backend, _guard) = with_stub("stub");
    let owner = owner("owner");
    let created = spawned(&registry, &owner, SpawnSpec::new("stub")).await;
    let id = created.id.as_str();
    let gate = Gate::new();
    backend
        .terminal(0)
        .unwrap()
        .set_close_gate(Some(gate.clone()));

    let first = registry.kill(&owner, id);
    tokio::pin!(first);
    assert!(poll!(&mut first).is_pending());
    let error = failure(registry.send(&owner, id, send("")).await);
    assert_eq!(error.code(), "TERMINAL_CLOSING");
    assert!(error.to_string().contains("closing"), "{error}");
    let second = registry.kill(&owner, id);
    tokio::pin!(second);
    assert!(poll!(&mut second).is_pending());
    gate.open();

    assert!(within(first).await.unwrap());
    assert!(!within(second).await.unwrap());
    let error = failure(registry.read(&owner, id, ReadRequest::default()).await);
    assert_eq!(error.code(), "NO_TERMINAL");
    assert_eq!(backend.terminal(0).unwrap().closed(), [CloseReason::Kill]);
}

#[tokio::test]
async fn awaits_owner_cleanup_and_removes_sessions_while_backend_registration_may_reload() {
    let (registry, backend, guard) = with_stub("stub");
    let owner = owner("owner");
    let created = spawned(&registry, &owner, SpawnSpec::new("stub")).await;
    guard.remove();
    assert!(registry.list_backends().is_empty());
    let page = registry
        .read(&owner, created.id.as_str(), ReadRequest::default())
        .await
        .unwrap();
    assert_eq!(page.lines, ["0:0"]);

    registry.dispose_owner(&owner).await.unwrap();
    assert_eq!(
        backend.terminal(0).unwrap().closed(),
        [CloseReason::OwnerDisposed]
    );
    assert!(registry.list(&owner).await.unwrap().is_empty());
    assert!(!registry.has_owner_activity(&owner));
}

#[tokio::test]
async fn kills_idempotently_and_service_disposal_closes_all_owners() {
    let (registry, backend, _guard) = with_stub("stub");
    let (first, second) = (owner("first"), owner("second"));
    let a = spawned(&registry, &first, SpawnSpec::new("stub")).await;
    spawned(&registry, &second, SpawnSpec::new("stub")).await;
    assert!(registry.kill(&first, a.id.as_str()).await.unwrap());
    assert_eq!(backend.terminal(0).unwrap().closed(), [CloseReason::Kill]);
    assert_eq!(
        failure(registry.kill(&first, a.id.as_str()).await).code(),
        "NO_TERMINAL"
    );

    registry.dispose().await.unwrap();
    assert_eq!(
        backend.terminal(1).unwrap().closed(),
        [CloseReason::RegistryDisposed]
    );
    let error = spawn_error(&registry, &first, SpawnSpec::new("stub")).await;
    assert_eq!(error.code(), "REGISTRY_DISPOSING");
    let id = a.id.as_str();
    let after = [
        failure(registry.list(&first).await),
        failure(registry.read(&first, id, ReadRequest::default()).await),
        failure(registry.kill(&first, id).await),
        failure(registry.probe(&first, id).await),
        failure(registry.send(&first, id, send("x")).await),
        failure(registry.dispose_owner(&first).await),
        failure(registry.dispose().await),
        failure(registry.register_backend(StubBackend::new("late"))),
        failure(registry.refresh().await),
    ];
    for error in after {
        assert_eq!(error.code(), "REGISTRY_DISPOSING", "{error}");
    }
}

#[tokio::test]
async fn aggregates_service_disposal_close_failures_after_attempting_every_record() {
    let (registry, backend, _guard) = with_stub("stub");
    let owner = owner("owner");
    spawned(&registry, &owner, SpawnSpec::new("stub")).await;
    spawned(&registry, &owner, SpawnSpec::new("stub")).await;
    let (failing, healthy) = (backend.terminal(0).unwrap(), backend.terminal(1).unwrap());
    failing.set_reject_close(true);

    // The second call joins the first's closes instead of closing again.
    let first = registry.kill_all(&owner);
    let joined = registry.kill_all(&owner);
    tokio::pin!(first, joined);
    assert!(poll!(&mut first).is_pending());
    assert!(poll!(&mut joined).is_pending());
    for result in [within(first).await, within(joined).await] {
        let error = failure(result);
        assert_eq!(error.code(), "CLOSE_FAILED");
        assert!(
            error
                .to_string()
                .starts_with("failed to close 1 terminal(s)"),
            "{error}"
        );
        assert!(error.to_string().contains("close failed"), "{error}");
    }
    // Every record was attempted: the healthy one closed despite the other.
    assert_eq!(healthy.closed(), [CloseReason::Kill]);
    assert!(healthy.is_closed());
    assert_eq!(registry.list(&owner).await.unwrap().len(), 1);

    failing.set_reject_close(false);
    assert_eq!(registry.kill_all(&owner).await.unwrap(), 1);
    assert_eq!(failing.closed(), [CloseReason::Kill, CloseReason::Kill]);
    assert!(registry.list(&owner).await.unwrap().is_empty());
    registry.dispose().await.unwrap();
    let error = spawn_error(&registry, &owner, SpawnSpec::new("stub")).await;
    assert_eq!(error.code(), "REGISTRY_DISPOSING");
}

#[tokio::test]
async fn clears_registries_and_runs_owner_cleanups_even_when_a_session_close_fails() {
    let (registry, backend, _guard) = with_stub("stub");
    let owner = owner("owner");
    spawned(&registry, &owner, SpawnSpec::new("stub")).await;
    let survivor = StubBackend::new("other");
    let _other = registry.register_backend(survivor).unwrap();
    spawned(&registry, &owner, SpawnSpec::new("other")).await;
    backend.terminal(0).unwrap().set_reject_close(true);

    let error = failure(registry.dispose().await);
    assert_cleanup_failed(&error);
    assert!(
        error.to_string().contains("failed to close 1 terminal(s)"),
        "{error}"
    );
    assert!(registry.list_backends().is_empty());
    assert!(!registry.has_owner_activity(&owner));
}

#[tokio::test]
async fn signal_returns_the_target_process_group() {
    let (registry, backend, _guard) = with_stub("stub");
    let owner = owner("owner");
    let created = spawned(&registry, &owner, SpawnSpec::new("stub")).await;
    let id = created.id.as_str();
    assert_eq!(
        registry.signal(&owner, id, Signal::Int).await.unwrap().pgid,
        12
    );
    let term = "SIGTERM".parse().unwrap();
    assert_eq!(registry.signal(&owner, id, term).await.unwrap().pgid, 13);
    assert_eq!(
        backend.terminal(0).unwrap().signals(),
        [Signal::Int, Signal::Term]
    );
    let screen = registry.screen(&owner, id).await.unwrap();
    assert_eq!(screen.text(), "stub ready");
}
