//! Published terminals: owner fencing, name rules, one send at a time,
//! kills (joined, failing, retried) and registry disposal.

use std::sync::{Arc, Mutex, OnceLock};

use crate::support::stub::{Gate, STUB_PID, StubBackend, StubTerminal};
use futures_util::poll;
use tmux_engine::Result;
use tmux_engine::registry::Registry;
use tmux_engine::registry::{
    CloseReason, OwnerId, ReadRequest, Signal, SpawnSpec, TerminalId, TerminalStatus, WaitReason,
};
use tokio::task::JoinHandle;

use super::{
    assert_cleanup_failed, dispose_task, failure, gate_spawns, owner, registry, send, spawn_error,
    spawned, started_spawn_task, with_stub, within,
};

#[tokio::test]
async fn publishes_only_after_spawn_and_fences_every_operation_to_the_exact_owner() {
    let (registry, backend) = with_stub();
    let gate = gate_spawns(&backend);
    let (owner, foreign) = (owner("owner"), owner("foreign"));

    let spec = SpawnSpec::new().name("main").cwd("/tmp");
    let started = backend.wait_spawns_started(1);
    let pending = started_spawn_task(&registry, &owner, spec, started).await;
    // Reserved but unpublished: active, yet not listed or addressable.
    assert!(backend.has_activity(&owner));
    assert!(registry.owner(&owner).list().await.unwrap().is_empty());
    assert_eq!(
        failure(
            registry
                .owner(&owner)
                .read("main", ReadRequest::default())
                .await
        )
        .code(),
        "NO_TERMINAL"
    );
    gate.open();
    let created = within(pending).await.unwrap().unwrap();

    TerminalId::parse(created.id.as_str()).unwrap();
    assert_eq!(created.name.as_deref(), Some("main"));
    assert_eq!(created.kind, "stub");
    assert_eq!(created.pid, Some(STUB_PID));
    assert_eq!(created.status, TerminalStatus::Running);
    assert!(backend.has_activity(&owner));
    assert!(!backend.has_activity(&foreign));
    assert_eq!(
        registry.owner(&owner).list().await.unwrap(),
        vec![created.clone()]
    );
    assert!(registry.owner(&foreign).list().await.unwrap().is_empty());

    let id = created.id.as_str();
    let read = registry
        .owner(&foreign)
        .read(id, ReadRequest::default())
        .await;
    let error = failure(read);
    assert_eq!(error.code(), "FOREIGN_TERMINAL");
    assert!(
        error.to_string().contains("belongs to another owner"),
        "{error}"
    );
    assert!(error.to_string().contains(id), "{error}");
    let foreign_calls = [
        failure(registry.owner(&foreign).signal(id, Signal::Int).await),
        failure(registry.owner(&foreign).kill(id).await),
        failure(registry.owner(&foreign).send(id, send("x")).await),
        failure(registry.owner(&foreign).screen(id).await),
        failure(registry.owner(&foreign).probe(id).await),
        failure(registry.owner(&foreign).attach(id).await),
        failure(registry.owner(&foreign).show(id).await),
    ];
    for error in foreign_calls {
        assert_eq!(error.code(), "FOREIGN_TERMINAL", "{error}");
    }
    // Names are per owner: another owner's name is simply unknown.
    let by_name = registry
        .owner(&foreign)
        .read("main", ReadRequest::default())
        .await;
    assert_eq!(failure(by_name).code(), "NO_TERMINAL");
    let unknown = registry
        .owner(&owner)
        .read("t-1-0123456789abcdef", ReadRequest::default());
    assert_eq!(failure(unknown.await).code(), "NO_TERMINAL");
    // The owner reaches it by id and by name.
    assert_eq!(
        registry.owner(&owner).show("main").await.unwrap().id,
        created.id
    );
    assert!(backend.terminal(0).unwrap().closed().is_empty());
}

#[tokio::test]
async fn rejects_bad_names_duplicate_names_and_active_sends() {
    let (registry, backend) = with_stub();
    let owner = owner("owner");
    let created = spawned(&registry, &owner, SpawnSpec::new().name("main")).await;
    let error = spawn_error(&registry, &owner, SpawnSpec::new().name("")).await;
    assert_eq!(error.code(), "INVALID_INPUT");
    assert!(error.to_string().contains("must be non-empty"), "{error}");
    for bad in ["a:b", "a.b", "a\nb"] {
        let spec = SpawnSpec::new().name(bad);
        let error = failure(registry.owner(&owner).spawn(spec).await);
        assert_eq!(error.code(), "INVALID_INPUT", "{bad:?}");
    }
    let error = spawn_error(&registry, &owner, SpawnSpec::new().name("main")).await;
    assert_eq!(error.code(), "DUPLICATE_NAME");
    assert!(error.to_string().contains("main"), "{error}");
    // Another owner may use the same name.
    registry
        .owner(&OwnerId::new("other").unwrap())
        .spawn(SpawnSpec::new().name("main"))
        .await
        .unwrap();

    let id = created.id.as_str();
    let operation = registry
        .owner(&owner)
        .send(id, send("echo hi"))
        .await
        .unwrap();
    let error = failure(registry.owner(&owner).send(id, send("pwd")).await);
    assert_eq!(error.code(), "SEND_ACTIVE");
    // The backend's send under way, read through the registry's handle.
    let output = operation.read_output();
    assert_eq!(
        (output.text.as_str(), &output.bytes[..], output.truncated),
        ("delta", &b"delta"[..], false)
    );
    assert_eq!((output.start.offset, output.end.offset), (0, 5));
    assert!(operation.cancel());
    assert!(!operation.cancel());
    let result = within(operation.result()).await.unwrap();
    assert_eq!(result.wait_reason, WaitReason::Cancelled);
    let next = registry
        .owner(&owner)
        .send("main", send("pwd"))
        .await
        .unwrap();
    next.cancel();
    within(next.result()).await.unwrap();

    let terminal = backend.terminal(0).unwrap();
    assert_eq!(terminal.sent().len(), 2);
    terminal.set_reject_send(true);
    let rejected = registry.owner(&owner).send(id, send("bad")).await.unwrap();
    let error = failure(within(rejected.result()).await);
    assert!(error.to_string().contains("send failed"), "{error}");
    // A failed send frees the terminal too.
    terminal.set_reject_send(false);
    let after = registry.owner(&owner).send(id, send("ok")).await.unwrap();
    assert!(terminal.finish_send());
    assert_eq!(
        within(after.result()).await.unwrap().wait_reason,
        WaitReason::Idle
    );
}

#[tokio::test]
async fn reports_rollback_and_close_failures_without_publishing_false_success() {
    let owner = owner("owner");
    let failed_spawn = StubTerminal::new();
    failed_spawn.set_reject_close(true);
    let disposal: Arc<Mutex<Option<JoinHandle<Result<()>>>>> = Arc::default();
    let built: Arc<OnceLock<Registry>> = Arc::default();
    let backend = {
        let (built, failed_spawn, slot) = (built.clone(), failed_spawn.clone(), disposal.clone());
        StubBackend::with_spawn(move |request| {
            // The registry is disposed while the spawn is in the backend.
            let registry = built.get().expect("the registry is built before it spawns");
            *slot.lock().unwrap() = Some(dispose_task(registry));
            let failed_spawn = failed_spawn.clone();
            Box::pin(async move {
                request.cancel.cancelled().await;
                Ok(failed_spawn)
            })
        })
    };
    let registry = registry(&backend);
    built.set(registry.clone()).unwrap();
    let error = spawn_error(&registry, &owner, SpawnSpec::new()).await;
    assert_eq!(error.code(), "ROLLBACK_FAILED");
    assert!(
        error.to_string().contains("spawn and rollback both failed"),
        "{error}"
    );
    let disposal = disposal.lock().unwrap().take().unwrap();
    let error = failure(within(disposal).await.unwrap());
    assert_cleanup_failed(&error);
    assert!(!backend.has_activity(&owner));
    assert_eq!(
        failure(registry.owner(&owner).list().await).code(),
        "REGISTRY_DISPOSING"
    );

    let next_owner = OwnerId::new("next").unwrap();
    let (registry, backend) = with_stub();
    let created = spawned(&registry, &next_owner, SpawnSpec::new()).await;
    backend.terminal(0).unwrap().set_reject_close(true);
    let error = failure(registry.owner(&next_owner).kill(created.id.as_str()).await);
    assert_eq!(error.code(), "CLOSE_FAILED");
    assert!(error.to_string().contains("close failed"), "{error}");
    assert_eq!(registry.owner(&next_owner).list().await.unwrap().len(), 1);
    // Kept for a retry, which works once the backend lets it.
    backend.terminal(0).unwrap().set_reject_close(false);
    assert!(
        registry
            .owner(&next_owner)
            .kill(created.id.as_str())
            .await
            .unwrap()
    );
    assert!(registry.owner(&next_owner).list().await.unwrap().is_empty());
}

#[tokio::test]
async fn joins_an_already_running_close_and_refuses_new_sends_while_closing() {
    let (registry, backend) = with_stub();
    let owner = owner("owner");
    let created = spawned(&registry, &owner, SpawnSpec::new()).await;
    let id = created.id.as_str();
    let gate = Gate::new();
    backend
        .terminal(0)
        .unwrap()
        .set_close_gate(Some(gate.clone()));

    let first = registry.owner(&owner).kill(id);
    tokio::pin!(first);
    assert!(poll!(&mut first).is_pending());
    let error = failure(registry.owner(&owner).send(id, send("")).await);
    assert_eq!(error.code(), "TERMINAL_CLOSING");
    assert!(error.to_string().contains("closing"), "{error}");
    let second = registry.owner(&owner).kill(id);
    tokio::pin!(second);
    assert!(poll!(&mut second).is_pending());
    gate.open();

    assert!(within(first).await.unwrap());
    assert!(!within(second).await.unwrap());
    let error = failure(
        registry
            .owner(&owner)
            .read(id, ReadRequest::default())
            .await,
    );
    assert_eq!(error.code(), "NO_TERMINAL");
    assert_eq!(backend.terminal(0).unwrap().closed(), [CloseReason::Kill]);
}

#[tokio::test]
async fn kills_idempotently_and_service_disposal_closes_all_owners() {
    let (registry, backend) = with_stub();
    let (first, second) = (owner("first"), owner("second"));
    let a = spawned(&registry, &first, SpawnSpec::new()).await;
    spawned(&registry, &second, SpawnSpec::new()).await;
    assert!(registry.owner(&first).kill(a.id.as_str()).await.unwrap());
    assert_eq!(backend.terminal(0).unwrap().closed(), [CloseReason::Kill]);
    assert_eq!(
        failure(registry.owner(&first).kill(a.id.as_str()).await).code(),
        "NO_TERMINAL"
    );

    registry.dispose().await.unwrap();
    assert_eq!(
        backend.terminal(1).unwrap().closed(),
        [CloseReason::RegistryDisposed]
    );
    let error = spawn_error(&registry, &first, SpawnSpec::new()).await;
    assert_eq!(error.code(), "REGISTRY_DISPOSING");
    let id = a.id.as_str();
    let after = [
        failure(registry.owner(&first).list().await),
        failure(
            registry
                .owner(&first)
                .read(id, ReadRequest::default())
                .await,
        ),
        failure(registry.owner(&first).kill(id).await),
        failure(registry.owner(&first).probe(id).await),
        failure(registry.owner(&first).send(id, send("x")).await),
        failure(registry.dispose().await),
        failure(registry.refresh().await),
    ];
    for error in after {
        assert_eq!(error.code(), "REGISTRY_DISPOSING", "{error}");
    }
}

#[tokio::test]
async fn a_failing_close_is_joined_reported_to_each_caller_and_kept_for_a_retry() {
    let (registry, backend) = with_stub();
    let owner = owner("owner");
    let doomed = spawned(&registry, &owner, SpawnSpec::new()).await;
    spawned(&registry, &owner, SpawnSpec::new()).await;
    let (failing, healthy) = (backend.terminal(0).unwrap(), backend.terminal(1).unwrap());
    failing.set_reject_close(true);

    // The second call joins the first's close instead of closing again.
    let first = registry.owner(&owner).kill(doomed.id.as_str());
    let joined = registry.owner(&owner).kill(doomed.id.as_str());
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
    // Closed once for both callers; the other terminal was not touched.
    assert_eq!(failing.closed(), [CloseReason::Kill]);
    assert!(healthy.closed().is_empty());
    assert_eq!(registry.owner(&owner).list().await.unwrap().len(), 2);

    failing.set_reject_close(false);
    assert!(
        registry
            .owner(&owner)
            .kill(doomed.id.as_str())
            .await
            .unwrap()
    );
    assert_eq!(failing.closed(), [CloseReason::Kill, CloseReason::Kill]);
    assert_eq!(registry.owner(&owner).list().await.unwrap().len(), 1);
    registry.dispose().await.unwrap();
    let error = spawn_error(&registry, &owner, SpawnSpec::new()).await;
    assert_eq!(error.code(), "REGISTRY_DISPOSING");
}

#[tokio::test]
async fn clears_registries_and_runs_owner_cleanups_even_when_a_session_close_fails() {
    let (registry, backend) = with_stub();
    let owner = owner("owner");
    spawned(&registry, &owner, SpawnSpec::new()).await;
    spawned(&registry, &owner, SpawnSpec::new()).await;
    backend.terminal(0).unwrap().set_reject_close(true);

    let error = failure(registry.dispose().await);
    assert_cleanup_failed(&error);
    assert!(
        error.to_string().contains("failed to close 1 terminal(s)"),
        "{error}"
    );
    // Every terminal was attempted: the healthy one closed despite the
    // other.
    assert_eq!(
        backend.terminal(1).unwrap().closed(),
        [CloseReason::RegistryDisposed]
    );
    assert!(!backend.has_activity(&owner));
}

#[tokio::test]
async fn signal_returns_the_target_process_group() {
    let (registry, backend) = with_stub();
    let owner = owner("owner");
    let created = spawned(&registry, &owner, SpawnSpec::new()).await;
    let id = created.id.as_str();
    assert_eq!(
        registry
            .owner(&owner)
            .signal(id, Signal::Int)
            .await
            .unwrap()
            .pgid,
        12
    );
    let term = "SIGTERM".parse().unwrap();
    assert_eq!(
        registry.owner(&owner).signal(id, term).await.unwrap().pgid,
        13
    );
    assert_eq!(
        backend.terminal(0).unwrap().signals(),
        [Signal::Int, Signal::Term]
    );
    let screen = registry.owner(&owner).screen(id).await.unwrap();
    assert_eq!(screen.text(), "stub ready");
}

/// `list_json` (what `GET /api/terminals` answers, each unchanged
/// terminal's bytes kept from the last list) is `list`'s answer encoded,
/// byte for byte, after every kind of change a snapshot shows: a rename,
/// an exit, a vanished server, a kill, another owner's terminals.
#[tokio::test]
async fn the_kept_list_json_is_the_list_encoded_after_every_change() {
    let (registry, backend) = with_stub();
    let (owner, foreign) = (owner("owner"), owner("foreign"));
    let listed = || async {
        let json = registry.owner(&owner).list_json().await.unwrap();
        let list = registry.owner(&owner).list().await.unwrap();
        assert_eq!(
            String::from_utf8(json).unwrap(),
            serde_json::to_string(&list).unwrap()
        );
        list
    };
    assert!(listed().await.is_empty());
    spawned(&registry, &owner, SpawnSpec::new().name("a")).await;
    spawned(&registry, &foreign, SpawnSpec::new().name("a")).await;
    spawned(&registry, &owner, SpawnSpec::new()).await;
    spawned(&registry, &owner, SpawnSpec::new().name("c")).await;
    assert_eq!(listed().await.len(), 3);
    // Listed twice unchanged: the kept bytes.
    assert_eq!(listed().await.len(), 3);

    registry.owner(&owner).rename("a", "renamed").await.unwrap();
    assert_eq!(listed().await[0].name.as_deref(), Some("renamed"));

    backend
        .terminal(2)
        .unwrap()
        .exit(tmux_engine::vocab::ExitStatus::Code(3));
    let list = listed().await;
    assert!(
        matches!(list[1].status, TerminalStatus::Exited { .. }),
        "{list:?}"
    );

    backend.terminal(3).unwrap().vanish("server killed");
    let list = listed().await;
    assert!(
        matches!(list[2].status, TerminalStatus::Gone { .. }),
        "{list:?}"
    );

    registry.owner(&owner).kill("renamed").await.unwrap();
    let list = listed().await;
    assert_eq!(list.len(), 2, "{list:?}");
    assert_eq!(registry.owner(&foreign).list().await.unwrap().len(), 1);
}
