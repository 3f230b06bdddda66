//! Viewers across a terminal's life: an `always` terminal whose server is
//! SIGKILLed right after a viewer's hello (spawned here, and adopted after a
//! registry reopen), hubs let go once their terminal is gone, and the last
//! bytes of a program that exits.

use std::time::Duration;

use bytes::Bytes;
use tmux_engine::attach::{AttachOptions, Attacher, Viewer, ViewerEvent};
use tmux_engine::registry::{RegistryConfig, RestartBackoff, RestartPolicy};

use super::{Env, WAIT, sh};

/// A restart loop that never gives up within a test and waits little.
fn quick_restarts() -> RegistryConfig {
    RegistryConfig::default().backoff(RestartBackoff::new(
        Duration::from_millis(10),
        Duration::from_millis(50),
        10_000,
        Duration::from_secs(3600),
    ))
}

/// An `always` echo loop.
fn echo_loop(name: &str) -> tmux_engine::registry::SpawnSpec {
    sh("echo run-$$; while read l; do echo got-$l; done")
        .name(name)
        .restart(RestartPolicy::Always)
}

/// The tmux server pid of a terminal, from its record's locator (rewritten
/// on every rebuild).
fn server_pid(env: &Env, id: &str) -> u32 {
    let path = env
        .dir
        .path()
        .join("state/terminals")
        .join(format!("{id}.json"));
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    u32::try_from(record["locator"]["server_pid"].as_u64().unwrap()).unwrap()
}

/// Kills the terminal's server `round`-dependently soon after the hello,
/// then checks the viewer gets a snapshot and afterwards live bytes of the
/// restarted program (its keystroke's echo).
async fn race_one(env: &Env, viewer: &mut Viewer, id: &str, round: u32) {
    let pid = server_pid(env, id);
    // Where the kill lands relative to the join's capture: right after the
    // hello, a little later, or after the first snapshot. The pause is the
    // race's position, not a wait for anything.
    let mut events = Vec::new();
    match round % 3 {
        0 => {}
        1 => tokio::time::sleep(Duration::from_micros(u64::from(round) * 97 % 3000)).await,
        _ => events.push(tokio::time::timeout(WAIT, viewer.recv()).await.unwrap()),
    }
    tmux_engine::tmux::process::signal(pid, rustix::process::Signal::KILL).unwrap();
    restarted(viewer, round, events).await;
}

/// Attaches while the terminal's server is SIGKILLed: the attach either
/// joins (waiting for the rebuilt server when the kill landed after the
/// registry's check) or is told `TERMINAL_DEAD` by the registry, never
/// that the server it just checked is gone.
async fn attach_racing_a_kill(env: &Env, attacher: &Attacher, id: &str, round: u32) -> Viewer {
    let pid = server_pid(env, id);
    let kill = async {
        for _ in 0..(round * 7) % 60 {
            tokio::task::yield_now().await;
        }
        tmux_engine::tmux::process::signal(pid, rustix::process::Signal::KILL).unwrap();
    };
    let (attached, ()) = tokio::join!(
        attacher.attach(&env.owner, "loop", AttachOptions::default()),
        kill
    );
    match attached {
        Ok(viewer) => viewer,
        Err(error) => {
            assert_eq!(error.code(), "TERMINAL_DEAD", "round {round}: {error:?}");
            crate::support::poll("the restarted terminal", WAIT, || async {
                attacher
                    .attach(&env.owner, "loop", AttachOptions::default())
                    .await
                    .ok()
            })
            .await
        }
    }
}

/// Checks the viewer gets a snapshot and then live bytes of the restarted
/// program: the echo of a keystroke typed until it arrives.
async fn restarted(viewer: &mut Viewer, round: u32, mut events: Vec<Option<ViewerEvent>>) {
    let ping = format!("ping-{round}");
    let needle = format!("got-{ping}");
    let mut text = Vec::new();
    let mut snapshots = 0;
    let mut retype = tokio::time::interval(Duration::from_millis(250));
    let seen = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            tokio::select! {
                event = viewer.recv() => {
                    let event = event.unwrap_or_else(|| panic!("round {round}: the stream ended: {:?}", tail(&events)));
                    match &event {
                        ViewerEvent::Snapshot { repaint, .. } => {
                            snapshots += 1;
                            text = repaint.to_vec();
                        }
                        ViewerEvent::Output { bytes, .. } => text.extend_from_slice(bytes),
                        _ => {}
                    }
                    events.push(Some(event));
                    if snapshots > 0 && String::from_utf8_lossy(&text).contains(&needle) {
                        return;
                    }
                }
                _ = retype.tick() => {
                    // Refused while the server is rebuilt; typed again until
                    // the restarted program echoes it.
                    let _ = viewer.input(Bytes::from(format!("{ping}\r"))).await;
                }
            }
        }
    })
    .await;
    assert!(
        seen.is_ok(),
        "round {round}: no snapshot then {needle:?}; last events: {:?}",
        tail(&events)
    );
}

#[tokio::test]
async fn always_viewers_get_the_restarted_program_whenever_the_kill_lands() {
    tokio::time::timeout(Duration::from_secs(240), async {
        let env = Env::with_config(quick_restarts()).await;
        let id = env.spawn(echo_loop("loop")).await.id.to_string();
        let attacher = Attacher::new(env.registry.clone());
        for round in 0..50 {
            if round % 4 == 3 {
                let mut viewer = attach_racing_a_kill(&env, &attacher, &id, round).await;
                restarted(&mut viewer, round, Vec::new()).await;
                continue;
            }
            let mut viewer = attacher
                .attach(&env.owner, "loop", AttachOptions::default())
                .await
                .unwrap();
            race_one(&env, &mut viewer, &id, round).await;
        }
        attacher.shutdown().await;
        env.finish().await;
    })
    .await
    .expect("50 rounds took too long");
}

#[tokio::test]
async fn adopted_always_viewers_get_the_restarted_program_after_a_reopen() {
    tokio::time::timeout(Duration::from_secs(240), async {
        let mut env = Env::with_config(quick_restarts()).await;
        let id = env.spawn(echo_loop("loop")).await.id.to_string();
        for round in 0..16 {
            // A serve restart: this registry lets go (its terminals keep
            // running), a new one adopts them from the state directory.
            env.registry.shutdown().await;
            let backend: std::sync::Arc<dyn tmux_engine::registry::Backend> =
                super::backend(env.dir.path());
            let config = quick_restarts().state_dir(env.dir.path().join("state"));
            env.registry = tmux_engine::registry::Registry::open_with(config, backend)
                .await
                .unwrap()
                .0;
            let attacher = Attacher::new(env.registry.clone());
            // A fresh attacher has no hub yet: odd rounds kill while the
            // first viewer's hub starts.
            let viewer = if round % 2 == 1 {
                let mut viewer = attach_racing_a_kill(&env, &attacher, &id, round).await;
                restarted(&mut viewer, round, Vec::new()).await;
                viewer
            } else {
                let mut viewer = attacher
                    .attach(&env.owner, "loop", AttachOptions::default())
                    .await
                    .unwrap();
                race_one(&env, &mut viewer, &id, round).await;
                viewer
            };
            viewer.input(Bytes::from_static(b"still\r")).await.unwrap();
            drop(viewer);
            attacher.shutdown().await;
        }
        env.finish().await;
    })
    .await
    .expect("the rounds took too long");
}

#[tokio::test]
async fn a_killed_terminals_hub_is_dropped_once_its_last_viewer_left() {
    crate::support::within(async {
        let env = Env::with_config(quick_restarts()).await;
        env.spawn(sh("while read l; do echo got-$l; done").name("plain"))
            .await;
        env.spawn(echo_loop("always")).await;
        let attacher = Attacher::new(env.registry.clone());
        for name in ["plain", "always"] {
            let mut viewer = attacher
                .attach(&env.owner, name, AttachOptions::default())
                .await
                .unwrap();
            let first = tokio::time::timeout(WAIT, viewer.recv()).await.unwrap();
            assert!(
                matches!(first, Some(ViewerEvent::Snapshot { .. })),
                "{first:?}"
            );
            assert_eq!(attacher.hub_count(), 1);
            env.registry.owner(&env.owner).kill(name).await.unwrap();
            // The viewer's stream ends (no restart of a killed terminal)...
            while tokio::time::timeout(WAIT, viewer.recv())
                .await
                .unwrap()
                .is_some()
            {}
            drop(viewer);
            // ...and the attacher keeps nothing of it.
            crate::support::poll("the hub to be dropped", WAIT, || async {
                (attacher.hub_count() == 0).then_some(())
            })
            .await;
        }
        attacher.shutdown().await;
        env.finish().await;
    })
    .await;
}

/// The last few of `events`, for a failure message.
fn tail<T>(events: &[T]) -> &[T] {
    &events[events.len().saturating_sub(8)..]
}

#[tokio::test]
async fn a_viewer_lagging_at_the_exit_gets_the_final_screen_before_the_exit() {
    crate::support::within(async {
        let env = Env::new().await;
        env.spawn(sh("read go; seq 1 100000; echo last-$((6*7)); exit 5").name("burst"))
            .await;
        let config = tmux_engine::attach::AttacherConfig::default().viewer_queue(16);
        let attacher = Attacher::with_config(env.registry.clone(), config);
        let mut fast = attacher
            .attach(&env.owner, "burst", AttachOptions::default())
            .await
            .unwrap();
        let mut stalled = attacher
            .attach(&env.owner, "burst", AttachOptions::default())
            .await
            .unwrap();
        // Both take their join's repaint first, so the stalled one is
        // live with room when the burst starts and lags behind it for sure.
        for viewer in [&mut fast, &mut stalled] {
            let first = tokio::time::timeout(WAIT, viewer.recv()).await.unwrap();
            assert!(
                matches!(first, Some(ViewerEvent::Snapshot { .. })),
                "{first:?}"
            );
        }
        fast.input(Bytes::from_static(b"\r")).await.unwrap();
        // The other viewer reads nothing until the program is over.
        let mut exit = None;
        while let Some(event) = tokio::time::timeout(WAIT, fast.recv()).await.unwrap() {
            if let ViewerEvent::Exit(status) = event {
                exit = Some(status);
            }
        }
        assert_eq!(exit, Some(tmux_engine::vocab::ExitStatus::Code(5)));
        let mut events = Vec::new();
        while let Some(event) = tokio::time::timeout(WAIT, stalled.recv()).await.unwrap() {
            events.push(event);
        }
        let n = events.len();
        assert!(n >= 2, "{events:?}");
        let ViewerEvent::Snapshot { repaint, .. } = &events[n - 2] else {
            panic!("no final repaint before the exit: {:?}", tail(&events));
        };
        assert!(
            String::from_utf8_lossy(repaint).contains("last-42"),
            "the final screen: {:?}",
            String::from_utf8_lossy(repaint)
        );
        assert_eq!(
            events[n - 1],
            ViewerEvent::Exit(tmux_engine::vocab::ExitStatus::Code(5))
        );
        attacher.shutdown().await;
        env.finish().await;
    })
    .await;
}
