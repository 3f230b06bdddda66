//! Persistence and adoption through the stub backend: records written before
//! publication and removed after a kill, re-adoption after the engine
//! "restarts" (a new registry on the same state directory and backend),
//! dead records kept as gone and recreated by policy, corrupt records,
//! reaping, and two registries sharing one directory.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::support::stub::{Gate, StubBackend};
use tmux_engine::registry::{
    BackendTerminal, ReadRequest, Registry, RegistryConfig, RestartBackoff, RestartPolicy,
    SpawnSpec, TerminalRecord, TerminalStatus,
};

use super::{
    backend_error, cancel_spawn_task, failure, owner, settled, spawn_error, spawn_task, spawned,
    within,
};

/// A temporary directory of mode 0700: a state directory must be private
/// (`tempfile` makes 0755 ones).
fn private_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .unwrap()
}

fn config(dir: &Path) -> RegistryConfig {
    let backoff = RestartBackoff::new(
        Duration::from_millis(10),
        Duration::from_millis(40),
        3,
        Duration::from_secs(60),
    );
    RegistryConfig::default().state_dir(dir).backoff(backoff)
}

async fn open(dir: &Path, backend: &Arc<StubBackend>) -> Registry {
    let (registry, report) = Registry::open_with(config(dir), backend.clone())
        .await
        .unwrap();
    assert!(report.corrupt.is_empty(), "{report:?}");
    registry
}

fn records(registry: &Registry) -> Vec<TerminalRecord> {
    let loaded = registry.state_dir().unwrap().load_all().unwrap();
    loaded.records.iter().map(|r| (**r).clone()).collect()
}

#[tokio::test]
async fn spawn_persists_a_record_before_publication_and_kill_removes_it() {
    let dir = private_tempdir();
    let backend = StubBackend::new();
    let registry = open(dir.path(), &backend).await;
    let owner = owner("owner");
    let spec = SpawnSpec::new()
        .name("main")
        .role("repl")
        .restart(RestartPolicy::OnAttach)
        .command(["bash", "-l"])
        .cwd("/tmp")
        .env("K", "v")
        .size(100, 30);
    let created = registry.owner(&owner).spawn(spec.clone()).await.unwrap();
    let record = records(&registry).pop().unwrap();
    assert_eq!(record.id, created.id);
    assert_eq!(record.owner, owner);
    assert_eq!(record.spec, spec);
    assert_eq!(record.created_ms, created.created_ms);
    assert_eq!(record.locator, backend.terminal(0).unwrap().locator());

    let terminal = backend.terminal(0).unwrap();
    terminal.set_reject_close(true);
    failure(registry.owner(&owner).kill("main").await);
    assert_eq!(
        records(&registry).len(),
        1,
        "a failed kill keeps the record"
    );
    terminal.set_reject_close(false);
    assert!(registry.owner(&owner).kill("main").await.unwrap());
    assert!(records(&registry).is_empty());
}

#[tokio::test]
async fn unpublished_spawns_leave_no_record() {
    let dir = private_tempdir();
    let backend = StubBackend::new();
    let throwing = StubBackend::with_spawn(|_request| {
        Box::pin(async { Err(backend_error("provider failed")) })
    });
    let owner = owner("owner");
    {
        let failing = open(dir.path(), &throwing).await;
        failure(failing.owner(&owner).spawn(SpawnSpec::new()).await);
        assert!(records(&failing).is_empty());
    }
    let registry = open(dir.path(), &backend).await;

    let gate = Gate::new();
    backend.set_spawn_gate(Some(gate.clone()));
    let pending = spawn_task(&registry, &owner, SpawnSpec::new());
    within(backend.wait_spawns_started(1)).await;
    cancel_spawn_task(pending).await;
    gate.open();
    settled(&backend, &owner).await;
    assert!(records(&registry).is_empty());
    let leftovers = std::fs::read_dir(dir.path().join("terminals"))
        .unwrap()
        .count();
    assert_eq!(leftovers, 0, "no temp files either");
}

#[tokio::test]
async fn open_adopts_live_terminals_with_their_metadata() {
    let dir = private_tempdir();
    let backend = StubBackend::new();
    let (alice, bob) = (owner("alice"), owner("bob"));
    let before = {
        let first = open(dir.path(), &backend).await;
        for (owner, name) in [(&alice, "one"), (&alice, "two"), (&bob, "one")] {
            let spec = SpawnSpec::new().name(name).role("shell");
            first.owner(owner).spawn(spec).await.unwrap();
        }
        let before = (
            first.owner(&alice).list().await.unwrap(),
            first.owner(&bob).list().await.unwrap(),
        );
        // The engine goes away without disposing: terminals keep running.
        drop(first);
        before
    };
    assert!(
        backend
            .terminals()
            .iter()
            .all(|terminal| terminal.closed().is_empty())
    );

    let (second, report) = Registry::open_with(config(dir.path()), backend.clone())
        .await
        .unwrap();
    assert_eq!(report.adopted.len(), 3);
    assert!(report.gone.is_empty() && report.failures.is_empty());
    let after = (
        second.owner(&alice).list().await.unwrap(),
        second.owner(&bob).list().await.unwrap(),
    );
    assert_eq!(after, before);
    let page = second
        .owner(&alice)
        .read("two", ReadRequest::default())
        .await
        .unwrap();
    assert_eq!(page.lines, ["0:0"]);
    let error = failure(
        second
            .owner(&alice)
            .spawn(SpawnSpec::new().name("one"))
            .await,
    );
    assert_eq!(error.code(), "DUPLICATE_NAME");
    assert!(second.owner(&bob).kill("one").await.unwrap());
    assert_eq!(records(&second).len(), 2);
}

#[tokio::test]
async fn open_keeps_dead_records_as_gone_and_recreates_them_by_policy() {
    let dir = private_tempdir();
    let backend = StubBackend::new();
    let owner = owner("owner");
    {
        let first = open(dir.path(), &backend).await;
        for (name, policy) in [
            ("never", RestartPolicy::Never),
            ("repl", RestartPolicy::OnAttach),
            ("daemon", RestartPolicy::Always),
        ] {
            let spec = SpawnSpec::new().name(name).restart(policy);
            first.owner(&owner).spawn(spec).await.unwrap();
        }
    }
    // Their servers die while no engine runs.
    for terminal in backend.terminals() {
        terminal.vanish("server killed");
    }

    let (second, report) = Registry::open_with(config(dir.path()), backend.clone())
        .await
        .unwrap();
    assert_eq!(report.gone.len(), 3, "{report:?}");
    assert!(report.adopted.is_empty());

    let never = second.owner(&owner).show("never").await.unwrap();
    assert!(
        matches!(never.status, TerminalStatus::Gone { .. }),
        "{never:?}"
    );
    assert_eq!(
        failure(second.owner(&owner).attach("never").await).code(),
        "TERMINAL_DEAD"
    );

    let repl = second.owner(&owner).attach("repl").await.unwrap();
    assert!(repl.recreated);
    assert_eq!(repl.snapshot.status, TerminalStatus::Running);
    let on_disk = records(&second)
        .into_iter()
        .find(|record| record.id == repl.snapshot.id)
        .unwrap();
    assert_eq!(
        on_disk.locator,
        repl.terminal.locator(),
        "the record follows the rebuild"
    );

    let deadline = tokio::time::Instant::now() + super::DEADLINE;
    loop {
        let daemon = second.owner(&owner).show("daemon").await.unwrap();
        if daemon.status.is_running() {
            assert_eq!(daemon.restarts, 1);
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{daemon:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(backend.terminals().len(), 5);
}

#[tokio::test]
async fn open_reports_and_skips_corrupt_records() {
    let dir = private_tempdir();
    let backend = StubBackend::new();
    let owner = owner("owner");
    {
        let first = open(dir.path(), &backend).await;
        first
            .owner(&owner)
            .spawn(SpawnSpec::new().name("ok"))
            .await
            .unwrap();
    }
    let corrupt = dir.path().join("terminals/t-1-0000000000000000.json");
    std::fs::write(&corrupt, b"{\"id\": truncated").unwrap();
    let (second, report) = Registry::open_with(config(dir.path()), backend.clone())
        .await
        .unwrap();
    // Moved aside, reported by the scan and by `list`'s companion, and
    // reported again (not moved twice) by the next registry.
    let aside = dir
        .path()
        .join("terminals/t-1-0000000000000000.json.corrupt");
    assert_eq!(report.corrupt.len(), 1);
    assert_eq!(report.corrupt[0].path, aside);
    assert!(aside.exists() && !corrupt.exists());
    assert_eq!(report.adopted.len(), 1);
    assert_eq!(second.owner(&owner).list().await.unwrap().len(), 1);
    assert_eq!(second.corrupt_records().len(), 1);
    let third = open_any(dir.path(), &backend).await;
    assert_eq!(third.corrupt_records()[0].path, aside);
    // A future version is not guessed at either.
    let mut future = records(&second).pop().unwrap();
    let json = std::fs::read_to_string(dir.path().join(format!("terminals/{}.json", future.id)))
        .unwrap()
        .replace("\"version\": 1", "\"version\": 2");
    std::fs::write(
        dir.path().join(format!("terminals/{}.json", future.id)),
        json,
    )
    .unwrap();
    future.version = 2;
    let report = second.refresh().await.unwrap();
    assert_eq!(report.corrupt.len(), 2, "{report:?}");
    assert!(report.corrupt.iter().any(|c| c.error.contains("version 2")));
}

async fn open_any(dir: &Path, backend: &Arc<StubBackend>) -> Registry {
    Registry::open_with(config(dir), backend.clone())
        .await
        .unwrap()
        .0
}

/// Issue 10, item 1: opening reaps nothing (reaping is explicit), and a
/// record moved aside as corrupt still claims its terminal.
#[tokio::test]
async fn reaping_is_explicit_and_spares_the_terminals_of_corrupt_records() {
    let dir = private_tempdir();
    let backend = StubBackend::new();
    let owner = owner("owner");
    let (orphan, garbled) = {
        let first = open(dir.path(), &backend).await;
        first
            .owner(&owner)
            .spawn(SpawnSpec::new().name("kept"))
            .await
            .unwrap();
        let orphan = first.owner(&owner).spawn(SpawnSpec::new()).await.unwrap();
        let garbled = first.owner(&owner).spawn(SpawnSpec::new()).await.unwrap();
        // As if the engine crashed between starting a server and recording it.
        first.state_dir().unwrap().remove(&orphan.id).unwrap();
        // And a record truncated on disk.
        std::fs::write(
            dir.path().join(format!("terminals/{}.json", garbled.id)),
            b"{\"version\": 1, \"id\"",
        )
        .unwrap();
        (orphan, garbled)
    };
    let (second, report) = Registry::open_with(config(dir.path()), backend.clone())
        .await
        .unwrap();
    assert!(backend.reaped().is_empty(), "open must not reap");
    assert_eq!(report.corrupt.len(), 1);
    second.owner(&owner).list().await.unwrap();
    assert!(backend.reaped().is_empty(), "list must not reap");
    let reaped = second.reap().await.unwrap();
    assert_eq!(backend.reaped(), std::slice::from_ref(&orphan.id));
    assert_eq!(reaped.removed, [orphan.id.to_string()]);
    assert_eq!(reaped.corrupt.len(), 1);
    assert_eq!(reaped.corrupt[0].id.as_ref(), Some(&garbled.id));
    assert!(backend.terminal(1).unwrap().is_closed());
    assert!(!backend.terminal(2).unwrap().is_closed());
    let listed = second.owner(&owner).list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name.as_deref(), Some("kept"));
}

/// A named spawn rescans only when another process may have written a
/// record with such a name since this one last checked it (the name lock's
/// stamps): a registry that checked a name before (or learnt its stamp),
/// then another's spawn or rename of it, still sees the name taken; a name
/// another process killed is free again.
#[tokio::test]
async fn a_name_another_registry_took_since_is_taken() {
    let dir = private_tempdir();
    let backend = StubBackend::new();
    let owner = owner("owner");
    let first = open(dir.path(), &backend).await;
    let second = open(dir.path(), &backend).await;
    // The second checks both names (and learns their stamps), then lets
    // them go.
    for name in ["spawned", "renamed"] {
        spawned(&second, &owner, SpawnSpec::new().name(name)).await;
        assert!(second.owner(&owner).kill(name).await.unwrap());
    }
    // The first spawns one name, and renames another terminal to the other;
    // it also spawns a name the second never checked (whose stamp the
    // second learnt at its second rescan).
    for name in ["spawned", "learnt"] {
        spawned(&first, &owner, SpawnSpec::new().name(name)).await;
    }
    spawned(&first, &owner, SpawnSpec::new().name("elsewhere")).await;
    first
        .owner(&owner)
        .rename("elsewhere", "renamed")
        .await
        .unwrap();
    // The rename first: the spawn's rescan would bring it in too.
    for name in ["renamed", "learnt", "spawned"] {
        let error = spawn_error(&second, &owner, SpawnSpec::new().name(name)).await;
        assert_eq!(error.code(), "DUPLICATE_NAME", "{name}");
    }
    // Killed by the first: free for the second, which had seen it taken.
    assert!(first.owner(&owner).kill("spawned").await.unwrap());
    spawned(&second, &owner, SpawnSpec::new().name("spawned")).await;
}

#[tokio::test]
async fn two_registries_on_one_state_dir_see_the_same_terminals() {
    let dir = private_tempdir();
    let backend = StubBackend::new();
    let owner = owner("owner");
    let first = open(dir.path(), &backend).await;
    let second = open(dir.path(), &backend).await;

    let main = first
        .owner(&owner)
        .spawn(SpawnSpec::new().name("main"))
        .await
        .unwrap();
    assert_eq!(
        second.owner(&owner).list().await.unwrap(),
        vec![main.clone()]
    );
    // A lookup that misses rescans before answering NO_TERMINAL.
    let other = second
        .owner(&owner)
        .spawn(SpawnSpec::new().name("other"))
        .await
        .unwrap();
    let page = first
        .owner(&owner)
        .read("other", ReadRequest::default())
        .await
        .unwrap();
    assert_eq!(page.lines, ["0:0"]);
    let error = failure(
        first
            .owner(&owner)
            .spawn(SpawnSpec::new().name("other"))
            .await,
    );
    assert_eq!(error.code(), "DUPLICATE_NAME");

    assert!(second.owner(&owner).kill("main").await.unwrap());
    let seen: Vec<_> = first
        .owner(&owner)
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|snapshot| snapshot.id)
        .collect();
    assert_eq!(seen, [other.id]);
    assert_eq!(
        failure(first.owner(&owner).show("main").await).code(),
        "NO_TERMINAL"
    );
}

/// A named spawn rescans the directory; a spawn beside it that wrote its
/// record after that scan looked and published before the scan's reconcile
/// is in no scan yet, and must not be taken for vanished (its live terminal
/// was let go of: a serve spawning 8 at once lost 408 control clients of
/// 1,000).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn spawns_beside_a_rescan_keep_their_live_terminals() {
    let dir = private_tempdir();
    let backend = StubBackend::new();
    let registry = open(dir.path(), &backend).await;
    let owner = owner("owner");
    let spawns: Vec<_> = (0..64)
        .map(|i| {
            let registry = registry.clone();
            let owner = owner.clone();
            tokio::spawn(async move {
                registry
                    .owner(&owner)
                    .spawn(SpawnSpec::new().name(format!("t{i}")))
                    .await
            })
        })
        .collect();
    for spawn in spawns {
        spawn.await.unwrap().unwrap();
    }
    let terminals = backend.terminals();
    assert_eq!(terminals.len(), 64);
    let let_go = terminals.iter().filter(|t| t.is_shut_down()).count();
    assert_eq!(let_go, 0, "{let_go} of 64 spawned terminals were let go of");
    assert_eq!(registry.owner(&owner).list().await.unwrap().len(), 64);
}

#[tokio::test]
async fn shutdown_lets_go_of_terminals_without_closing_them_and_stops_every_task() {
    let dir = private_tempdir();
    let backend = StubBackend::new();
    let registry = open(dir.path(), &backend).await;
    let owner = owner("owner");
    let always = SpawnSpec::new()
        .name("always")
        .restart(RestartPolicy::Always);
    registry.owner(&owner).spawn(always).await.unwrap();
    registry
        .owner(&owner)
        .spawn(SpawnSpec::new().name("plain"))
        .await
        .unwrap();
    // A send in flight is a task of the registry's too.
    let send = registry
        .owner(&owner)
        .send("plain", super::send("x"))
        .await
        .unwrap();

    within(registry.shutdown()).await;
    for terminal in backend.terminals() {
        assert!(terminal.is_shut_down());
        assert!(terminal.closed().is_empty(), "shutdown closes nothing");
    }
    assert_eq!(
        failure(within(send.result()).await).code(),
        "REGISTRY_DISPOSING"
    );
    assert_eq!(records(&registry).len(), 2, "records stay for adoption");
    assert_eq!(
        failure(registry.owner(&owner).list().await).code(),
        "REGISTRY_DISPOSING"
    );
    // Again, or a dispose after it: nothing more to do.
    within(registry.shutdown()).await;
    assert_eq!(
        failure(registry.dispose().await).code(),
        "REGISTRY_DISPOSING"
    );

    let second = open(dir.path(), &backend).await;
    let names: Vec<_> = second
        .owner(&owner)
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|snapshot| snapshot.name.unwrap())
        .collect();
    assert_eq!(names, ["always", "plain"]);
    second.dispose().await.unwrap();
}
