//! Lifecycle against real tmux: publication after
//! spawn, fencing, names, one send at a time, kill, disposal, rollback.

use tmux_engine::registry::{OwnerId, SendRequest, SpawnSpec, TerminalStatus, WaitFor};
use tmux_engine::vocab::ExitStatus;

use super::{Env, WAIT, assert_clean, server_dirs, sh, wait_exited, with_env};
use crate::support::within;

#[tokio::test]
async fn publishes_after_spawn_and_fences_owners() {
    with_env(async |env| {
        let snapshot = env.spawn(SpawnSpec::new().name("main").role("repl")).await;
        assert!(snapshot.status.is_running());
        assert!(snapshot.pid.is_some());
        assert_eq!(server_dirs(&env.runtime()).len(), 1);
        let bob = OwnerId::new("bob").unwrap();
        let id = snapshot.id.to_string();
        for error in [
            env.registry.owner(&bob).show(&id).await.unwrap_err(),
            env.registry.owner(&bob).kill(&id).await.unwrap_err(),
            env.registry.owner(&bob).screen(&id).await.unwrap_err(),
        ] {
            assert_eq!(error.code(), "FOREIGN_TERMINAL");
        }
        assert_eq!(
            env.registry
                .owner(&bob)
                .show("main")
                .await
                .unwrap_err()
                .code(),
            "NO_TERMINAL"
        );
        let duplicate = env
            .registry
            .owner(&env.owner)
            .spawn(SpawnSpec::new().name("main"))
            .await
            .unwrap_err();
        assert_eq!(duplicate.code(), "DUPLICATE_NAME");
        for bad in ["", "a:b", "x\ny", "a.b"] {
            let error = env
                .registry
                .owner(&env.owner)
                .spawn(SpawnSpec::new().name(bad))
                .await
                .unwrap_err();
            assert_eq!(error.code(), "INVALID_INPUT", "{bad:?}");
        }
        // Same name, other owner: fine.
        env.registry
            .owner(&bob)
            .spawn(SpawnSpec::new().name("main"))
            .await
            .unwrap();
        assert_eq!(
            env.registry.owner(&env.owner).list().await.unwrap().len(),
            1
        );
    })
    .await;
}

#[tokio::test]
async fn one_send_at_a_time_and_kill_is_idempotent() {
    with_env(async |env| {
        env.spawn(SpawnSpec::new().name("main")).await;
        let first = env
            .registry
            .owner(&env.owner)
            .send(
                "main",
                SendRequest {
                    text: "sleep 30".into(),
                    submit: true,
                    wait: WaitFor::Exit,
                    timeout: None,
                    history: true,
                    keys: Vec::new(),
                },
            )
            .await
            .unwrap();
        let second = env
            .registry
            .owner(&env.owner)
            .send("main", SendRequest::default())
            .await
            .unwrap_err();
        assert_eq!(second.code(), "SEND_ACTIVE");
        let pid = env
            .registry
            .owner(&env.owner)
            .show("main")
            .await
            .unwrap()
            .pid
            .unwrap();
        let (a, b) = tokio::join!(
            env.registry.owner(&env.owner).kill("main"),
            env.registry.owner(&env.owner).kill("main")
        );
        let outcomes = [a.unwrap(), b.unwrap()];
        assert!(outcomes.contains(&true), "{outcomes:?}");
        // The send in flight ended with the terminal.
        first.result().await.ok();
        assert_eq!(
            env.registry
                .owner(&env.owner)
                .kill("main")
                .await
                .unwrap_err()
                .code(),
            "NO_TERMINAL"
        );
        assert!(
            !tmux_engine::tmux::process::is_alive(pid),
            "pane process survived"
        );
        assert_clean(&env.runtime()).await;
    })
    .await;
}

#[tokio::test]
async fn kill_takes_the_whole_process_tree() {
    with_env(async |env| {
        let marker = env.dir.path().join("pids");
        // A child that ignores SIGHUP (what tmux sends) keeps running
        // unless the engine kills the whole session.
        env.spawn(
            sh(&format!(
                "trap '' HUP; (trap '' HUP; sleep 300) & echo $! > '{}'; wait",
                marker.display()
            ))
            .name("tree"),
        )
        .await;
        let child: u32 = crate::support::poll("child pid", super::WAIT, || async {
            std::fs::read_to_string(&marker).ok()?.trim().parse().ok()
        })
        .await;
        assert!(tmux_engine::tmux::process::is_alive(child));
        assert!(env.registry.owner(&env.owner).kill("tree").await.unwrap());
        assert!(
            !tmux_engine::tmux::process::is_alive(child),
            "grandchild survived kill"
        );
    })
    .await;
}

#[tokio::test]
async fn dispose_closes_everything_of_every_owner() {
    within(async {
        let env = Env::new().await;
        let bob = OwnerId::new("bob").unwrap();
        for name in ["a", "b"] {
            env.spawn(SpawnSpec::new().name(name)).await;
            env.registry
                .owner(&bob)
                .spawn(SpawnSpec::new().name(name))
                .await
                .unwrap();
        }
        assert_eq!(server_dirs(&env.runtime()).len(), 4);
        // Bob's kills end exactly his servers; disposal then ends the rest.
        for name in ["a", "b"] {
            assert!(env.registry.owner(&bob).kill(name).await.unwrap());
        }
        assert_eq!(server_dirs(&env.runtime()).len(), 2);
        let registry = env.registry.clone();
        env.finish().await;
        assert_eq!(
            registry
                .owner(&OwnerId::new("alice").unwrap())
                .list()
                .await
                .unwrap_err()
                .code(),
            "REGISTRY_DISPOSING"
        );
    })
    .await;
}

#[tokio::test]
async fn cancelled_spawn_leaves_no_server_or_socket() {
    with_env(async |env| {
        for delay_us in [0u64, 2_000, 10_000, 30_000] {
            // Dropped at the deadline, if it has not finished by then.
            let spawn = env.registry.owner(&env.owner).spawn(SpawnSpec::new());
            let delay = std::time::Duration::from_micros(delay_us);
            if let Ok(result) = tokio::time::timeout(delay, spawn).await {
                result.unwrap();
            }
        }
        // Whatever won each race, no unpublished server is left once the
        // dropped spawns' rollbacks (in the background) are done.
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let published = env.registry.owner(&env.owner).list().await.unwrap();
            let dirs = server_dirs(&env.runtime());
            if dirs.len() == published.len() {
                break;
            }
            // Says which server outlived its rollback, and what the
            // registry holds, so a failure names its terminal.
            assert!(
                tokio::time::Instant::now() < deadline,
                "dropped spawns left servers after {WAIT:?}: dirs {dirs:?}, published {:?}",
                published
                    .iter()
                    .map(|s| (&s.id, &s.status))
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        // ...nor a spawn lock file of a terminal that was never published
        // (one small file per failed spawn piled up in the state directory).
        let locks = env.dir.path().join("state").join("locks");
        let published: Vec<String> = env
            .registry
            .owner(&env.owner)
            .list()
            .await
            .unwrap()
            .into_iter()
            .map(|snapshot| snapshot.id.to_string())
            .collect();
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let stray: Vec<String> = std::fs::read_dir(&locks)
                .unwrap()
                .filter_map(|entry| {
                    let name = entry.unwrap().file_name().into_string().unwrap();
                    let id = name.strip_suffix(".spawn.lock")?.to_owned();
                    (!published.contains(&id)).then_some(id)
                })
                .collect();
            if stray.is_empty() {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "spawn locks of unpublished terminals left after {WAIT:?}: {stray:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn death_is_pushed_without_probing() {
    with_env(async |env| {
        env.spawn(sh("read x; exit 3").name("three")).await;
        // The status watch changes with no call from here (no show, no
        // list, no probe) that could have asked tmux: the death is pushed.
        let attached = env
            .registry
            .owner(&env.owner)
            .attach("three")
            .await
            .unwrap();
        let mut status = attached.terminal.watch_status();
        env.send("three", b"go", true, WaitFor::None).await;
        let pushed = status.wait_for(|s| !s.is_running()).await.unwrap().clone();
        assert_eq!(
            pushed,
            TerminalStatus::Exited {
                exit: ExitStatus::Code(3)
            }
        );
        let dead = wait_exited(env, "three", 3).await;
        // The dead pane is kept with its status (policy never): list shows it.
        let listed = env.registry.owner(&env.owner).list().await.unwrap();
        assert_eq!(listed[0].status, dead.status);
    })
    .await;
}

/// Issue 10, item 10: a person's attach is serialised with the engine's
/// control clients: `attach_lock` holds the server's handshake lock (the
/// CLI's `attach` took none before) until dropped.
#[tokio::test]
async fn attach_lock_holds_the_handshake_lock_until_dropped() {
    use std::fs::TryLockError;
    within(async {
        let env = Env::new().await;
        let id = env.spawn(sh("exec cat")).await.id.to_string();
        let dirs = server_dirs(&env.runtime());
        assert_eq!(dirs.len(), 1, "{dirs:?}");
        // The handshake lock is the server's directory itself.
        let path = dirs[0].clone();
        let lock = env
            .registry
            .owner(&env.owner)
            .attach_lock(&id)
            .await
            .unwrap();
        assert!(lock.is_held());
        let file = std::fs::File::open(&path).unwrap();
        assert!(
            matches!(file.try_lock(), Err(TryLockError::WouldBlock)),
            "the attach lock is the handshake lock"
        );
        drop(lock);
        file.try_lock().expect("free once dropped");
        file.unlock().unwrap();
        assert!(env.registry.owner(&env.owner).kill(&id).await.unwrap());
        env.finish().await;
    })
    .await;
}

#[tokio::test]
async fn the_pid_is_the_running_programs_and_never_an_ended_ones() {
    // `pid` is remembered between looks (issue 27: `list` asked /proc three
    // times per terminal); what it remembers must end with the program.
    with_env(async |env| {
        env.spawn(sh("read line; exit 3").name("reader")).await;
        let show = async || {
            env.registry
                .owner(&env.owner)
                .show("reader")
                .await
                .unwrap()
                .pid
        };
        let pid = show().await.expect("a running program has a pid");
        // The wrapper's child from its fork on: its exec of the program may
        // still be under way (an empty cmdline in the middle of it), never
        // another process's.
        crate::support::poll("the pid to run the program", WAIT, || async {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline)
                .contains("read line")
                .then_some(())
        })
        .await;
        assert_eq!(show().await, Some(pid), "the same program, the same pid");
        env.registry
            .owner(&env.owner)
            .write("reader", "\n".into())
            .await
            .unwrap();
        wait_exited(env, "reader", 3).await;
        assert_ne!(show().await, Some(pid), "the ended program's pid is kept");
        assert_clean_after_kill(env).await;
    })
    .await;
}

async fn assert_clean_after_kill(env: &Env) {
    env.registry.owner(&env.owner).kill("reader").await.unwrap();
    assert_clean(&env.runtime()).await;
}
