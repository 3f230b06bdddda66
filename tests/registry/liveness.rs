//! Liveness against real tmux: real signals, probes of every state,
//! recreation by policy, adoption by a second registry, and reaping.

use std::time::Duration;

use tmux_engine::registry::{
    Liveness, ReadRequest, RegistryConfig, RestartBackoff, RestartPolicy, Signal, SpawnSpec,
    TerminalStatus, WaitFor, WaitReason,
};
use tmux_engine::vocab::ExitStatus;

use super::{Env, WAIT, assert_clean, open, server_dirs, sh, wait_exited, wait_status, with_env};
use crate::support::{poll, within};

#[tokio::test]
async fn signals_are_real_signals_to_the_foreground_group() {
    with_env(async |env| {
        env.spawn(SpawnSpec::new().name("sh")).await;
        env.send("sh", b"sleep 30", true, WaitFor::Idle).await;
        let delivery = env
            .registry
            .owner(&env.owner)
            .signal("sh", Signal::Int)
            .await
            .unwrap();
        let shell = env
            .registry
            .owner(&env.owner)
            .show("sh")
            .await
            .unwrap()
            .pid
            .unwrap();
        assert_ne!(
            delivery.pgid,
            i32::try_from(shell).unwrap(),
            "went to the shell, not the job"
        );
        // The shell survives and is back at its prompt.
        let back = env.send("sh", b"echo $?", true, WaitFor::StdinRead).await;
        assert!(
            back.viewport.as_deref().unwrap_or_default().contains("130"),
            "{}",
            back.viewport.as_deref().unwrap_or_default()
        );
        // TERM to a program that traps it proves a signal, not typed text.
        env.spawn(
            sh("trap 'echo got-term; exit 7' TERM; echo trap-set; while :; do sleep 0.1; done")
                .name("trap"),
        )
        .await;
        // A TERM before the trap is set kills the shell outright.
        poll("the trap", WAIT, || async {
            let page = env
                .registry
                .owner(&env.owner)
                .read("trap", ReadRequest::default())
                .await
                .ok()?;
            page.lines.iter().any(|l| l == "trap-set").then_some(())
        })
        .await;
        env.registry
            .owner(&env.owner)
            .signal("trap", Signal::Term)
            .await
            .unwrap();
        wait_exited(env, "trap", 7).await;
        let error = env
            .registry
            .owner(&env.owner)
            .signal("trap", Signal::Int)
            .await
            .unwrap_err();
        assert_eq!(error.code(), "TERMINAL_DEAD");
    })
    .await;
}

#[tokio::test]
async fn probes_tell_alive_exited_and_server_gone() {
    with_env(async |env| {
        env.spawn(SpawnSpec::new().name("live")).await;
        let report = env.registry.owner(&env.owner).probe("live").await.unwrap();
        assert_eq!(report.observed, Liveness::Alive);
        assert!(!report.recreated);
        env.spawn(sh("exit 4").name("done")).await;
        wait_exited(env, "done", 4).await;
        let report = env.registry.owner(&env.owner).probe("done").await.unwrap();
        assert_eq!(
            report.observed,
            Liveness::Exited {
                exit: ExitStatus::Code(4)
            }
        );
        // policy never: the status stays, nothing is recreated.
        assert!(!report.recreated);
        assert_eq!(report.snapshot.restarts, 0);
        // Kill the server behind the engine's back: pushed as gone.
        let pid = server_pid(env, "live").await;
        tmux_engine::tmux::process::signal(pid, rustix::process::Signal::KILL).unwrap();
        let gone = wait_status(env, "live", |s| {
            matches!(s.status, TerminalStatus::Gone { .. })
        })
        .await;
        assert!(
            gone.status.to_string().contains("server gone"),
            "{}",
            gone.status
        );
        let report = env.registry.owner(&env.owner).probe("live").await.unwrap();
        assert!(
            matches!(report.observed, Liveness::ServerGone { .. }),
            "{:?}",
            report.observed
        );
    })
    .await;
}

/// The tmux server pid of a terminal, from its record's locator.
async fn server_pid(env: &Env, name: &str) -> u32 {
    let id = env.registry.owner(&env.owner).show(name).await.unwrap().id;
    let path = env
        .dir
        .path()
        .join("state/terminals")
        .join(format!("{id}.json"));
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    u32::try_from(record["locator"]["server_pid"].as_u64().unwrap()).unwrap()
}

#[tokio::test]
async fn on_attach_recreates_a_dead_repl_once_and_never_a_live_one() {
    with_env(async |env| {
        env.spawn(
            SpawnSpec::new()
                .name("repl")
                .restart(RestartPolicy::OnAttach),
        )
        .await;
        // Alive: concurrent probes recreate nothing.
        let probes = futures_util::future::join_all(
            (0..5).map(|_| env.registry.owner(&env.owner).probe("repl")),
        )
        .await;
        assert!(probes.into_iter().all(|p| !p.unwrap().recreated));
        env.send("repl", b"exit 5", true, WaitFor::Exit).await;
        wait_status(env, "repl", |s| !s.status.is_running()).await;
        let probes = futures_util::future::join_all(
            (0..5).map(|_| env.registry.owner(&env.owner).probe("repl")),
        )
        .await;
        let recreated = probes
            .into_iter()
            .filter(|p| p.as_ref().unwrap().recreated)
            .count();
        assert_eq!(recreated, 1);
        let snapshot = env.registry.owner(&env.owner).show("repl").await.unwrap();
        assert!(snapshot.status.is_running());
        assert_eq!(snapshot.restarts, 1);
        // The respawned shell works and its output reaches sends.
        let hello = env
            .send("repl", b"echo again-$((1+1))", true, WaitFor::StdinRead)
            .await;
        assert_eq!(hello.wait_reason, WaitReason::StdinRead);
        assert!(
            hello
                .viewport
                .as_deref()
                .unwrap_or_default()
                .contains("again-2"),
            "{}",
            hello.viewport.as_deref().unwrap_or_default()
        );
        // attach on a live one: no recreation.
        let target = env.registry.owner(&env.owner).attach("repl").await.unwrap();
        assert!(!target.recreated);
    })
    .await;
}

#[tokio::test]
async fn a_new_registry_adopts_terminals_with_names_owners_and_scrollback() {
    within(async {
        let env = Env::new().await;
        env.spawn(
            sh("echo persisted-line; exec sleep 300")
                .name("keep")
                .role("worker"),
        )
        .await;
        env.spawn(sh("exit 2").name("dead")).await;
        wait_status(&env, "dead", |s| !s.status.is_running()).await;
        poll("output", WAIT, || async {
            let page = env
                .registry
                .owner(&env.owner)
                .read("keep", ReadRequest::default())
                .await
                .ok()?;
            page.lines
                .iter()
                .any(|l| l == "persisted-line")
                .then_some(())
        })
        .await;
        let (env, report) = env.reopen().await;
        // Adopted lazily (issue 10, item 4): recorded, checked, not attached.
        assert!(report.adopted.is_empty(), "{report:?}");
        assert!(report.gone.is_empty(), "{report:?}");
        assert!(report.failures.is_empty(), "{:?}", report.failures);
        let (second, owner) = (&env.registry, &env.owner);
        let listed = second.owner(owner).list().await.unwrap();
        let names: Vec<_> = listed.iter().map(|s| s.name.clone().unwrap()).collect();
        assert_eq!(names, ["keep", "dead"]);
        assert_eq!(listed[0].role.as_deref(), Some("worker"));
        assert!(listed[0].status.is_running());
        assert_eq!(
            listed[1].status,
            TerminalStatus::Exited {
                exit: ExitStatus::Code(2)
            }
        );
        let page = second
            .owner(owner)
            .read("keep", ReadRequest::default())
            .await
            .unwrap();
        assert!(page.lines.iter().any(|l| l == "persisted-line"), "{page:?}");
        env.finish().await;
    })
    .await;
}

/// An engine server started outside the registry, stamped as a terminal
/// `id` of the test's state directory (as a spawn that crashed before its
/// record was written leaves one), or unstamped.
async fn bare_server(env: &Env, id: Option<&str>) -> tmux_engine::tmux::ServerHandle {
    let mut extra = Vec::new();
    if let Some(id) = id {
        let state = std::fs::canonicalize(env.dir.path().join("state")).unwrap();
        extra.push(format!("set -s @tmux-engine-id '{id}'"));
        extra.push(format!("set -s @tmux-engine-state '{}'", state.display()));
    }
    let mut opts = tmux_engine::tmux::ServerOptions::default()
        .runtime_dir(Some(env.runtime()))
        .shell(Some("/bin/sh".into()));
    opts.extra_config = extra;
    tmux_engine::tmux::Server::start(crate::support::tmux(), opts)
        .await
        .unwrap()
        .into_detached()
}

/// Issue 10, item 1: only what is proven unclaimed is reaped. Before, a
/// server whose query failed (here: stopped, so it times out) lost its
/// directory, a corrupt record's live server was killed, and so was any
/// marked server of no record, whoever's state directory it served.
#[tokio::test]
async fn reap_removes_only_what_is_proven_unclaimed() {
    within(async {
        let env = Env::new().await;
        env.spawn(SpawnSpec::new().name("kept")).await;
        let garbled = env.spawn(SpawnSpec::new().name("garbled")).await;
        let stopped = env.spawn(sh("exec sleep 300").name("stopped")).await;
        // Its record truncated on disk: moved aside, its server spared.
        let record = env
            .dir
            .path()
            .join(format!("state/terminals/{}.json", garbled.id));
        std::fs::write(&record, b"{\"version\": 1, \"id").unwrap();
        // A server that cannot answer and whose record is gone.
        let stopped_server = server_dirs(&env.runtime());
        std::fs::remove_file(
            env.dir
                .path()
                .join(format!("state/terminals/{}.json", stopped.id)),
        )
        .unwrap();
        let stopped_dir = stopped_server
            .iter()
            .find(|dir| {
                std::fs::read_to_string(dir.join("tmux.conf"))
                    .is_ok_and(|conf| conf.contains(stopped.id.as_str()))
            })
            .unwrap()
            .clone();
        let stopped_pid = socket_server_pid(&stopped_dir);
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(stopped_pid).unwrap(),
            rustix::process::Signal::STOP,
        )
        .unwrap();
        // A crashed spawn's server (stamped, no record), an unstamped server
        // (not proven ours), and a directory whose server is gone.
        let orphan = bare_server(&env, Some("t-1-00000000000000aa")).await;
        let foreign = bare_server(&env, None).await;
        let stale = env.runtime().join("tmux-engine-stale0");
        std::fs::create_dir(&stale).unwrap();
        std::os::unix::net::UnixListener::bind(stale.join("tmux.sock")).unwrap();
        assert_eq!(server_dirs(&env.runtime()).len(), 6);

        let report = env.registry.reap().await.unwrap();
        assert_eq!(report.removed.len(), 2, "{report:?}");
        assert!(!orphan.dir().exists());
        assert!(!tmux_engine::tmux::process::is_alive(orphan.pid()));
        assert!(!stale.exists());
        assert!(foreign.dir().exists() && tmux_engine::tmux::process::is_alive(foreign.pid()));
        assert!(
            stopped_dir.exists(),
            "an unanswered query is not \"no server\""
        );
        assert_eq!(report.corrupt.len(), 1, "{report:?}");
        assert_eq!(report.skipped.len(), 3, "{report:?}");
        // The corrupt record's server lives on, and so does the recorded one.
        let probe = env.registry.owner(&env.owner).probe("kept").await.unwrap();
        assert_eq!(probe.observed, Liveness::Alive);
        assert_eq!(server_dirs(&env.runtime()).len(), 4);

        // Once it answers, the unrecorded one is proven unclaimed.
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(stopped_pid).unwrap(),
            rustix::process::Signal::CONT,
        )
        .unwrap();
        let report = env.registry.reap().await.unwrap();
        assert_eq!(report.removed.len(), 1, "{report:?}");
        assert!(!stopped_dir.exists());
        // Clean up what the registry may not touch.
        std::fs::remove_file(dir_of_corrupt(&env, &garbled.id)).unwrap();
        env.registry.reap().await.unwrap();
        let mut foreign = foreign;
        foreign.kill().await.unwrap();
        env.finish().await;
    })
    .await;
}

/// The moved-aside record of `id`.
fn dir_of_corrupt(env: &Env, id: &tmux_engine::registry::TerminalId) -> std::path::PathBuf {
    env.dir
        .path()
        .join(format!("state/terminals/{id}.json.corrupt"))
}

/// The pid of the tmux server serving `dir`'s socket.
pub(super) fn socket_server_pid(dir: &std::path::Path) -> i32 {
    let out = std::process::Command::new("tmux")
        .arg("-S")
        .arg(dir.join("tmux.sock"))
        .args(["display-message", "-p", "#{pid}"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

#[tokio::test]
async fn dropping_the_registry_keeps_terminals_running() {
    within(async {
        let env = Env::new().await;
        let pid = env.spawn(sh("exec sleep 300").name("s")).await.pid.unwrap();
        let Env {
            dir,
            registry,
            owner,
            guard,
        } = env;
        drop(registry);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(tmux_engine::tmux::process::is_alive(pid));
        let (second, _) = open(dir.path()).await;
        assert!(second.owner(&owner).kill("s").await.unwrap());
        assert!(!tmux_engine::tmux::process::is_alive(pid));
        second.dispose().await.unwrap();
        assert_clean(&super::runtime(dir.path())).await;
        drop(guard);
    })
    .await;
}

#[tokio::test]
async fn shutdown_lets_go_of_running_terminals_and_a_second_registry_adopts_them() {
    within(async {
        let env = Env::new().await;
        let pid = env.spawn(sh("exec cat").name("c")).await.pid.unwrap();
        env.send("c", b"before-shutdown", true, WaitFor::Idle).await;
        let socket = server_dirs(&env.runtime())
            .pop()
            .expect("the terminal's server directory")
            .join("tmux.sock");
        assert!(
            !list_clients(&socket).is_empty(),
            "the registry is attached"
        );
        env.registry.shutdown().await;
        // A second call waits for the first and returns.
        env.registry.shutdown().await;
        let after = env.registry.owner(&env.owner).list().await.unwrap_err();
        assert_eq!(after.code(), "REGISTRY_DISPOSING");
        // The terminal runs on, with no control client of ours attached.
        assert!(tmux_engine::tmux::process::is_alive(pid));
        poll("the control client to leave", WAIT, || async {
            list_clients(&socket).is_empty().then_some(())
        })
        .await;
        let (env, report) = env.reopen().await;
        assert!(report.adopted.is_empty(), "{report:?}");
        assert!(report.failures.is_empty(), "{:?}", report.failures);
        // Issue 10, item 4: opening, listing and showing attach no control
        // client (before, every open attached one to every server).
        let (second, owner) = (&env.registry, &env.owner);
        let listed = second.owner(owner).list().await.unwrap();
        assert_eq!(listed.len(), 1);
        assert!(listed[0].status.is_running(), "{listed:?}");
        assert_eq!(listed[0].pid, Some(pid), "{listed:?}");
        second.owner(owner).show("c").await.unwrap();
        assert!(list_clients(&socket).is_empty(), "list attached a client");
        let page = second
            .owner(owner)
            .read("c", ReadRequest::default())
            .await
            .unwrap();
        assert!(
            page.lines.iter().any(|l| l == "before-shutdown"),
            "{page:?}"
        );
        env.send("c", b"after-adoption", true, WaitFor::Idle).await;
        let page = env
            .registry
            .owner(&env.owner)
            .read("c", ReadRequest::default())
            .await
            .unwrap();
        assert!(page.lines.iter().any(|l| l == "after-adoption"), "{page:?}");
        env.finish().await;
    })
    .await;
}

/// The exit handshake's wrapper waits for an engine to acknowledge a
/// program's end: one that ends while no engine is attached is let go by
/// the next look (list, or adoption), so its exit and its last output show.
#[tokio::test]
async fn a_program_that_ends_while_no_engine_is_attached_shows_its_exit() {
    within(async {
        let env = Env::new().await;
        let pid = env
            .spawn(sh("read go; echo done-$((6*7)); exit 3").name("r"))
            .await
            .pid
            .unwrap();
        let socket = server_dirs(&env.runtime())
            .pop()
            .expect("the terminal's server directory")
            .join("tmux.sock");
        env.registry.shutdown().await;
        poll("the control client to leave", WAIT, || async {
            list_clients(&socket).is_empty().then_some(())
        })
        .await;
        // Typed with no engine attached: the program reads it, prints and
        // ends; its wrapper then waits for an acknowledgement.
        let typed = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .args(["send-keys", "-t", "%0", "go", "Enter"])
            .status()
            .unwrap();
        assert!(typed.success());
        poll("the program to end", WAIT, || async {
            (!tmux_engine::tmux::process::is_alive(pid)).then_some(())
        })
        .await;
        let (env, _) = env.reopen().await;
        let (second, owner) = (&env.registry, &env.owner);
        // Polled: the wrapper opens its fifo a moment after the program
        // ends, and only then can it be let go. Without the release it
        // would be listed running until an engine attached.
        let exited = TerminalStatus::Exited {
            exit: ExitStatus::Code(3),
        };
        poll("the exit to be listed", WAIT, || async {
            let listed = second.owner(owner).list().await.unwrap();
            (listed[0].status == exited).then_some(())
        })
        .await;
        let page = second
            .owner(owner)
            .read("r", ReadRequest::default())
            .await
            .unwrap();
        assert!(page.lines.iter().any(|l| l == "done-42"), "{page:?}");
        env.finish().await;
    })
    .await;
}

/// The pids of the clients attached to the server on `socket`; panics when
/// no server answers.
fn list_clients(socket: &std::path::Path) -> Vec<String> {
    let out = std::process::Command::new("tmux")
        .arg("-S")
        .arg(socket)
        .args(["list-clients", "-F", "#{client_pid}"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "no server on {}: {out:?}",
        socket.display()
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn always_recreates_a_dying_program_until_the_cap_then_keeps_its_status() {
    within(async {
        let ms = Duration::from_millis;
        let backoff = RestartBackoff::new(ms(20), ms(40), 2, Duration::from_secs(60));
        let env = Env::with_config(RegistryConfig::default().backoff(backoff)).await;
        let first = env
            .spawn(sh("exit 5").name("crashy").restart(RestartPolicy::Always))
            .await;
        // It dies at once, each time: recreated twice (the cap), then left
        // dead with the status of its last run. Nothing probes it: deaths
        // are pushed and the policy acts on them.
        let last = wait_status(&env, "crashy", |s| {
            s.restarts == 2 && !s.status.is_running()
        })
        .await;
        assert_eq!(
            last.status,
            TerminalStatus::Exited {
                exit: ExitStatus::Code(5)
            }
        );
        assert_eq!(last.id, first.id, "recreated in place, same id");
        // The cap holds: five times the longest backoff later, no third
        // run. (A negative needs a window; the policy's timing itself is
        // tested on paused time with the stub backend.)
        tokio::time::sleep(ms(200)).await;
        let later = env.registry.owner(&env.owner).show("crashy").await.unwrap();
        assert_eq!(later.restarts, 2);
        assert!(!later.status.is_running());
        env.finish().await;
    })
    .await;
}
