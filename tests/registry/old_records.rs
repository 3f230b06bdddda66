//! Records written by an older engine keep loading: the fixture was
//! written by `tmux-engine spawn` at commit 4230fea (before the registry
//! core was reworked), its server long gone.

use tmux_engine::backend::TmuxLocator;
use tmux_engine::registry::{RestartPolicy, TerminalStatus};
use tmux_engine::tmux::ProcessId;

use super::{Env, WAIT, with_env};
use crate::support::poll;

/// The fixture's file, named by the id it records.
const RECORD: &str = include_str!("logic/fixtures/record-v1-main-4230fea.json");
const ID: &str = "t-1a2318aedd8-d26ce6d2cc22231b";

/// Writes the fixture into `env`'s state directory and rescans it.
async fn load_fixture(env: &Env) {
    let terminals = env.dir.path().join("state/terminals");
    std::fs::write(terminals.join(format!("{ID}.json")), RECORD).unwrap();
    let report = env.registry.refresh().await.unwrap();
    assert!(report.corrupt.is_empty(), "{report:?}");
}

/// The record loads with every field the old engine wrote (its `kind`
/// too), reports its vanished server as gone, and its `on-attach` policy
/// rebuilds it from the recorded spec.
#[tokio::test(flavor = "multi_thread")]
async fn a_record_written_by_the_previous_engine_loads_and_is_recreated() {
    with_env(async |env| {
        load_fixture(env).await;
        let listed = env.registry.owner(&env.owner).list().await.unwrap();
        assert_eq!(listed.len(), 1, "{listed:?}");
        let old = &listed[0];
        assert_eq!(old.id.as_str(), ID);
        assert_eq!(old.name.as_deref(), Some("main"));
        assert_eq!(old.role.as_deref(), Some("repl"));
        assert_eq!(old.kind, "tmux");
        assert_eq!(old.restart, RestartPolicy::OnAttach);
        assert_eq!(old.created_ms, 1_796_127_518_194);
        assert!(
            matches!(old.status, TerminalStatus::Gone { .. }),
            "{:?}",
            old.status
        );
        let probed = env.registry.owner(&env.owner).probe("main").await.unwrap();
        assert!(probed.recreated, "{probed:?}");
        assert!(probed.snapshot.status.is_running(), "{probed:?}");
        // The recorded command, cwd-independent output and size came back.
        let screen = poll("the rebuilt program's output", WAIT, || async {
            let screen = env.registry.owner(&env.owner).screen("main").await.unwrap();
            screen.contains("hi").then_some(screen)
        })
        .await;
        assert_eq!((screen.size().cols, screen.size().rows), (100, 30));
        assert!(env.registry.owner(&env.owner).kill("main").await.unwrap());
    })
    .await;
}

/// The fixture's locator reads as typed processes (pid with start time)
/// and writes back as the same JSON, so either engine reads the other's.
#[test]
fn the_old_locator_reads_typed_and_writes_back_the_same_json() {
    let record: serde_json::Value = serde_json::from_str(RECORD).unwrap();
    let value = &record["locator"];
    let locator: TmuxLocator = serde_json::from_value(value.clone()).unwrap();
    let known = |pid, start| {
        Some(ProcessId {
            pid,
            start_time: Some(start),
        })
    };
    assert_eq!(locator.server, known(28175, 1_055_302));
    assert_eq!(locator.pane_process, known(28176, 1_055_303));
    assert_eq!(locator.session, "main");
    assert_eq!(&locator.to_value(), value);
}
