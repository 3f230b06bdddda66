//! Liveness and restart policies, backend-agnostic: probe before attach,
//! recreation of dead REPL terminals only (never of a live one), and the
//! `never` / `on-attach` / `always` policies of `RestartPolicy`. Time-based
//! cases run on paused tokio time.

use std::sync::Arc;
use std::time::Duration;

use crate::support::stub::{Gate, StubBackend, StubTerminal};
use futures_util::future::join_all;
use tmux_engine::registry::{
    BackendTerminal, CloseReason, Liveness, OwnerId, Registry, RegistryConfig, RestartBackoff,
    RestartPolicy, SpawnSpec, TerminalSnapshot, TerminalStatus,
};
use tmux_engine::vocab::ExitStatus;
use tokio::time::Instant;

use super::{DEADLINE, failure, owner, within};

/// A registry with a `stub` backend and one terminal of `policy`.
async fn one_terminal(
    config: RegistryConfig,
    policy: RestartPolicy,
) -> (Registry, Arc<StubBackend>, OwnerId, TerminalSnapshot) {
    let backend = StubBackend::new();
    let registry = Registry::new(config, backend.clone()).unwrap();
    let owner = owner("conv_abc");
    let spec = SpawnSpec::new().name("tui").role("repl").restart(policy);
    let created = registry.owner(&owner).spawn(spec).await.unwrap();
    (registry, backend, owner, created)
}

/// Waits until `terminal` reports running again.
async fn running_again(terminal: &StubTerminal) {
    let mut status = terminal.watch_status();
    within(status.wait_for(TerminalStatus::is_running))
        .await
        .unwrap();
}

/// Polls `registry.show` until `condition` holds on the snapshot.
async fn show_until(
    registry: &Registry,
    owner: &OwnerId,
    target: &str,
    condition: impl Fn(&TerminalSnapshot) -> bool,
) -> TerminalSnapshot {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let snapshot = registry.owner(owner).show(target).await.unwrap();
        if condition(&snapshot) {
            return snapshot;
        }
        assert!(Instant::now() < deadline, "timed out: {snapshot:?}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test]
async fn attach_probes_liveness_before_attaching_a_running_terminal() {
    let (registry, backend, owner, created) =
        one_terminal(RegistryConfig::default(), RestartPolicy::Never).await;
    let terminal = backend.terminal(0).unwrap();
    let target = registry.owner(&owner).attach("tui").await.unwrap();
    assert_eq!(terminal.probes(), 1);
    assert!(!target.recreated);
    assert_eq!(target.snapshot.id, created.id);
    assert_eq!(target.terminal.locator(), terminal.locator());
    assert_eq!(target.terminal.locator(), terminal.locator());
}

#[tokio::test]
async fn attach_to_an_unknown_terminal_is_no_terminal() {
    let (registry, _backend, owner, _created) =
        one_terminal(RegistryConfig::default(), RestartPolicy::Never).await;
    let error = failure(registry.owner(&owner).attach("nope").await);
    assert_eq!(error.code(), "NO_TERMINAL");
    assert!(error.to_string().contains("nope"), "{error}");
}

#[tokio::test]
async fn attach_to_a_defunct_terminal_is_terminal_dead() {
    let (registry, backend, owner, _created) =
        one_terminal(RegistryConfig::default(), RestartPolicy::Never).await;
    backend.terminal(0).unwrap().exit(ExitStatus::Code(1));
    let error = failure(registry.owner(&owner).attach("tui").await);
    assert_eq!(error.code(), "TERMINAL_DEAD");
    assert!(error.to_string().contains("exited with code 1"), "{error}");
}

#[tokio::test]
async fn attach_with_a_stale_running_flag_probes_and_refuses() {
    let (registry, backend, owner, _created) =
        one_terminal(RegistryConfig::default(), RestartPolicy::Never).await;
    let terminal = backend.terminal(0).unwrap();
    // The backend still believes it runs; only a probe finds the truth.
    terminal.set_probe_answer(Some(Liveness::ServerGone {
        reason: "no server running".to_owned(),
    }));
    assert_eq!(
        registry.owner(&owner).show("tui").await.unwrap().status,
        TerminalStatus::Running
    );
    let error = failure(registry.owner(&owner).attach("tui").await);
    assert_eq!(error.code(), "TERMINAL_DEAD");
    let status = registry.owner(&owner).show("tui").await.unwrap().status;
    assert_eq!(
        status,
        TerminalStatus::Gone {
            reason: "no server running".to_owned()
        }
    );
}

#[tokio::test]
async fn attach_recreates_a_dead_repl_terminal_whose_server_vanished_once() {
    let (registry, backend, owner, created) =
        one_terminal(RegistryConfig::default(), RestartPolicy::OnAttach).await;
    let stale = backend.terminal(0).unwrap();
    stale.vanish("server exited");

    let first = registry.owner(&owner).attach("tui").await.unwrap();
    assert!(first.recreated);
    let fresh = backend.terminal(1).unwrap();
    assert_eq!(first.terminal.locator(), fresh.locator());
    assert_ne!(first.terminal.locator(), stale.locator());
    assert_eq!(first.snapshot.id, created.id);
    assert_eq!(first.snapshot.restarts, 1);
    assert_eq!(first.snapshot.status, TerminalStatus::Running);
    assert_eq!(stale.closed(), [CloseReason::Replaced]);

    // The fresh terminal is live: attaching again must not recreate it.
    let second = registry
        .owner(&owner)
        .attach(created.id.as_str())
        .await
        .unwrap();
    assert!(!second.recreated);
    assert_eq!(second.terminal.locator(), fresh.locator());
    assert_eq!(backend.terminals().len(), 2);
    assert!(fresh.closed().is_empty());
}

#[tokio::test]
async fn attach_respawns_a_dead_repl_pane_in_place() {
    let (registry, backend, owner, _created) =
        one_terminal(RegistryConfig::default(), RestartPolicy::OnAttach).await;
    let terminal = backend.terminal(0).unwrap();
    terminal.exit(ExitStatus::Code(0));
    let target = registry.owner(&owner).attach("tui").await.unwrap();
    assert!(target.recreated);
    assert_eq!(terminal.respawns(), 1);
    assert_eq!(target.terminal.locator(), terminal.locator());
    let again = registry.owner(&owner).attach("tui").await.unwrap();
    assert!(!again.recreated);
    assert_eq!(terminal.respawns(), 1);
    assert_eq!(backend.terminals().len(), 1);
}

#[tokio::test]
async fn attach_to_a_dead_terminal_without_recreation_policy_keeps_refusing() {
    let (registry, backend, owner, _created) =
        one_terminal(RegistryConfig::default(), RestartPolicy::Never).await;
    let terminal = backend.terminal(0).unwrap();
    terminal.vanish("server exited");
    for _ in 0..2 {
        let error = failure(registry.owner(&owner).attach("tui").await);
        assert_eq!(error.code(), "TERMINAL_DEAD");
    }
    let report = registry.owner(&owner).probe("tui").await.unwrap();
    assert!(report.observed.is_dead());
    assert!(!report.recreated);
    assert_eq!(backend.terminals().len(), 1);
    assert_eq!(terminal.respawns(), 0);
}

#[tokio::test]
async fn concurrent_probes_respawn_a_dead_pane_exactly_once() {
    let (registry, backend, owner, _created) =
        one_terminal(RegistryConfig::default(), RestartPolicy::OnAttach).await;
    let terminal = backend.terminal(0).unwrap();
    terminal.exit(ExitStatus::Signal(9));
    let reports = join_all((0..8).map(|_| registry.owner(&owner).probe("tui"))).await;
    let recreated = reports
        .into_iter()
        .filter(|report| report.as_ref().unwrap().recreated)
        .count();
    assert_eq!(recreated, 1);
    assert_eq!(terminal.respawns(), 1);
}

#[tokio::test]
async fn concurrent_attaches_rebuild_a_vanished_server_exactly_once() {
    let (registry, backend, owner, _created) =
        one_terminal(RegistryConfig::default(), RestartPolicy::OnAttach).await;
    backend.terminal(0).unwrap().vanish("server exited");
    // Hold the rebuild so every other attach queues behind it.
    let gate = Gate::new();
    backend.set_spawn_gate(Some(gate.clone()));
    let attaches: Vec<_> = (0..8)
        .map(|_| {
            let (registry, owner) = (registry.clone(), owner.clone());
            tokio::spawn(async move { registry.owner(&owner).attach("tui").await })
        })
        .collect();
    within(backend.wait_spawns_started(2)).await;
    gate.open();
    let mut recreated = 0;
    for attach in attaches {
        let target = within(attach).await.unwrap().unwrap();
        recreated += usize::from(target.recreated);
        assert_eq!(
            target.terminal.locator(),
            backend.terminal(1).unwrap().locator()
        );
    }
    assert_eq!(recreated, 1);
    assert_eq!(backend.terminals().len(), 2);
}

#[tokio::test]
async fn a_live_terminal_is_never_recreated() {
    let (registry, backend, owner, _created) =
        one_terminal(RegistryConfig::default(), RestartPolicy::OnAttach).await;
    for _ in 0..5 {
        let report = registry.owner(&owner).probe("tui").await.unwrap();
        assert_eq!(report.observed, Liveness::Alive);
        assert!(!report.recreated);
    }
    assert_eq!(backend.terminal(0).unwrap().respawns(), 0);
    assert_eq!(backend.terminals().len(), 1);
}

#[tokio::test]
async fn an_unresponsive_terminal_is_not_recreated() {
    let (registry, backend, owner, _created) =
        one_terminal(RegistryConfig::default(), RestartPolicy::OnAttach).await;
    let terminal = backend.terminal(0).unwrap();
    terminal.set_probe_answer(Some(Liveness::Unresponsive {
        waited: Duration::from_secs(2),
    }));
    let error = failure(registry.owner(&owner).attach("tui").await);
    assert_eq!(error.code(), "UNRESPONSIVE");
    assert!(!registry.owner(&owner).probe("tui").await.unwrap().recreated);
    assert_eq!(terminal.respawns(), 0);
    assert_eq!(backend.terminals().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn never_keeps_the_exit_status_pushed_without_probing() {
    let (registry, backend, owner, _created) =
        one_terminal(RegistryConfig::default(), RestartPolicy::Never).await;
    let terminal = backend.terminal(0).unwrap();
    terminal.exit(ExitStatus::Code(3));
    let listed = registry.owner(&owner).list().await.unwrap();
    let exited = TerminalStatus::Exited {
        exit: ExitStatus::Code(3),
    };
    assert_eq!(listed[0].status, exited);
    assert_eq!(terminal.probes(), 0);
    tokio::time::sleep(Duration::from_secs(3600)).await;
    let report = registry.owner(&owner).probe("tui").await.unwrap();
    assert!(!report.recreated);
    assert_eq!(report.snapshot.status, exited);
    assert_eq!(terminal.respawns(), 0);
}

fn backoff_registry(stable_after: Duration) -> RegistryConfig {
    let backoff = RestartBackoff::new(
        Duration::from_secs(1),
        Duration::from_secs(4),
        4,
        stable_after,
    );
    RegistryConfig::default().backoff(backoff)
}

#[tokio::test(start_paused = true)]
async fn always_recreates_on_death_with_exponential_backoff_and_a_cap() {
    let registry = backoff_registry(Duration::from_secs(3600));
    let (registry, backend, owner, _created) = one_terminal(registry, RestartPolicy::Always).await;
    let terminal = backend.terminal(0).unwrap();
    for (index, delay) in [1, 2, 4, 4].into_iter().enumerate() {
        let died = Instant::now();
        terminal.exit(ExitStatus::Code(1));
        running_again(&terminal).await;
        assert_eq!(
            terminal.respawn_times()[index] - died,
            Duration::from_secs(delay)
        );
    }
    // The cap: the fifth death stays dead.
    terminal.exit(ExitStatus::Code(1));
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(terminal.respawns(), 4);
    let snapshot = registry.owner(&owner).show("tui").await.unwrap();
    assert_eq!(snapshot.restarts, 4);
    assert!(!snapshot.status.is_running());
}

#[tokio::test(start_paused = true)]
async fn always_backoff_resets_after_a_stable_run() {
    let registry = backoff_registry(Duration::from_secs(10));
    let (_registry, backend, _owner, _created) =
        one_terminal(registry, RestartPolicy::Always).await;
    let terminal = backend.terminal(0).unwrap();
    let mut delays = Vec::new();
    for stable in [false, false, true] {
        if stable {
            tokio::time::sleep(Duration::from_secs(10)).await;
        }
        let died = Instant::now();
        terminal.exit(ExitStatus::Code(1));
        running_again(&terminal).await;
        delays.push((*terminal.respawn_times().last().unwrap() - died).as_secs());
    }
    assert_eq!(delays, [1, 2, 1]);
}

#[tokio::test(start_paused = true)]
async fn always_rebuilds_a_vanished_server_from_its_spec() {
    let registry = backoff_registry(Duration::from_secs(3600));
    let (registry, backend, owner, created) = one_terminal(registry, RestartPolicy::Always).await;
    let died = Instant::now();
    backend.terminal(0).unwrap().vanish("server exited");
    within(backend.wait_spawns_started(2)).await;
    assert_eq!(Instant::now() - died, Duration::from_secs(1));
    let snapshot = show_until(&registry, &owner, "tui", |snapshot| snapshot.restarts == 1).await;
    assert_eq!(snapshot.id, created.id);
    assert_eq!(snapshot.status, TerminalStatus::Running);
    assert_eq!(snapshot.role.as_deref(), Some("repl"));
    assert_eq!(backend.terminals().len(), 2);
    assert_eq!(
        backend.terminal(0).unwrap().closed(),
        [CloseReason::Replaced]
    );
}

#[tokio::test(start_paused = true)]
async fn a_killed_always_terminal_is_not_recreated() {
    let registry = backoff_registry(Duration::from_secs(3600));
    let (registry, backend, owner, _created) = one_terminal(registry, RestartPolicy::Always).await;
    assert!(registry.owner(&owner).kill("tui").await.unwrap());
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(backend.terminals().len(), 1);
    assert_eq!(backend.terminal(0).unwrap().respawns(), 0);
    assert!(registry.owner(&owner).list().await.unwrap().is_empty());
}
