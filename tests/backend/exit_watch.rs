//! A pane's program's end reaches the watcher through the pane's relay,
//! which holds the pidfd on the pane's process, so this process holds
//! none beside the relay's link: one descriptor per idle terminal. A
//! respawned program's end comes the same way; a relay killed, or none at
//! all, still ends in the exit being learnt (a pidfd of this process's own
//! then, where no relay watches).

use tmux_engine::registry::RestartPolicy;

use super::*;
use crate::support::relays;

/// The pidfds process `process` (`self` or a pid) holds on process `pid`,
/// as its `/proc` fdinfo names them.
fn pidfds_on(process: &str, pid: u32) -> usize {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{process}/fd")) else {
        return 0;
    };
    let want = format!("Pid:\t{pid}");
    fds.flatten()
        .filter(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|to| to.as_os_str() == "anon_inode:[pidfd]")
        })
        .filter(|fd| {
            let info = format!(
                "/proc/{process}/fdinfo/{}",
                fd.file_name().to_string_lossy()
            );
            std::fs::read_to_string(info).is_ok_and(|info| info.lines().any(|l| l == want))
        })
        .count()
}

/// The pane's process (`#{pane_pid}`: the exit handshake's wrapper) of the
/// one server under `runtime`.
pub(super) fn pane_pid(runtime: &Path) -> u32 {
    tmux_at(runtime, &["list-panes", "-F", "#{pane_pid}"])
        .trim()
        .parse()
        .unwrap()
}

/// Waits until a relay under `runtime` watches `pid` for this process,
/// and checks that this process holds no pidfd on it meanwhile.
async fn watched_by_the_relay(runtime: &Path, pid: u32) {
    poll("the relay to watch the pane's process", WAIT, || async {
        relays(runtime)
            .iter()
            .any(|relay| pidfds_on(&relay.to_string(), pid) == 1)
            .then_some(())
    })
    .await;
    assert_eq!(pidfds_on("self", pid), 0, "a pidfd of this process's own");
}

/// Runs `body` on a fresh registry (its terminals read through their relay
/// or not) with one terminal running [`ends`] and its pane's process, then
/// ends the program (its status exact), kills the terminal, disposes the
/// registry and checks nothing is left.
async fn with_ends(relayed: bool, body: impl AsyncFnOnce(&Env, &Path, u32)) {
    crate::support::within(async {
        let env = if relayed {
            let dir = crate::support::test_dir();
            let registry = open_relayed(dir.path(), |config| config).await;
            Env {
                guard: Cleanup(runtime(dir.path())),
                dir,
                registry,
                owner: OwnerId::new("alice").unwrap(),
            }
        } else {
            Env::new().await
        };
        let rt = env.runtime();
        env.spawn(ends()).await;
        let pane = pane_pid(&rt);
        body(&env, &rt, pane).await;
        end(&env).await;
        env.registry.owner(&env.owner).kill("ends").await.unwrap();
        env.finish().await;
    })
    .await;
}

/// The program ends with 7 once it reads a line.
fn ends() -> SpawnSpec {
    sh("read line; exit 7")
        .name("ends")
        .restart(RestartPolicy::OnAttach)
}

/// Ends the program and waits for its exact status.
async fn end(env: &Env) {
    env.send("ends", b"", true, WaitFor::None).await;
    wait_exited(env, "ends", 7).await;
}

#[tokio::test]
async fn the_relay_tells_each_end_and_this_process_holds_no_pidfd() {
    with_ends(true, async |env, rt, first| {
        watched_by_the_relay(rt, first).await;
        end(env).await;
        // Respawned in place: the new pane process is watched the same way
        // (and ended by `with_ends`).
        let owned = env.registry.owner(&env.owner);
        assert!(owned.probe("ends").await.unwrap().recreated);
        assert_eq!(owned.show("ends").await.unwrap().restarts, 1);
        let second = pane_pid(rt);
        assert_ne!(second, first);
        watched_by_the_relay(rt, second).await;
    })
    .await;
}

#[tokio::test]
async fn a_killed_relay_still_ends_in_the_exit_being_learnt() {
    with_ends(true, async |_, rt, pane| {
        watched_by_the_relay(rt, pane).await;
        let relay = relays(rt);
        assert_eq!(relay.len(), 1, "{relay:?}");
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(relay[0].try_into().unwrap()).unwrap(),
            rustix::process::Signal::KILL,
        )
        .unwrap();
        // The watch goes on: on a new relay's link, or a pidfd here.
        poll("the pane's process to be watched again", WAIT, || async {
            let by_relay = relays(rt)
                .iter()
                .any(|r| *r != relay[0] && pidfds_on(&r.to_string(), pane) == 1);
            (by_relay || pidfds_on("self", pane) == 1).then_some(())
        })
        .await;
    })
    .await;
}

#[tokio::test]
async fn without_a_relay_this_process_watches_the_end_itself() {
    with_ends(false, async |_, rt, pane| {
        assert!(relays(rt).is_empty());
        poll("this process to watch the pane's process", WAIT, || async {
            (pidfds_on("self", pane) == 1).then_some(())
        })
        .await;
    })
    .await;
}

/// The relay tells the pane's end while tmux does not answer (its server
/// stopped): the watcher's question about the end fails `UNRESPONSIVE`,
/// which says nothing is dead, so the watch starts over, and the terminal
/// stays running (not gone: a restart policy would start a second server)
/// until tmux, continued, answers with the exact end.
#[tokio::test]
async fn an_end_told_while_tmux_stalls_is_learnt_once_it_answers() {
    super::with_cat(super::relink::stalling, async |registry, owner, rt| {
        let owned = || registry.owner(owner);
        let pane = pane_pid(rt);
        watched_by_the_relay(rt, pane).await;
        {
            let _stopped = crate::support::Stopped::new(super::idle_link::server_pid(rt));
            // The program and its wrapper: the relay, which runs, tells
            // the end; tmux, stopped, neither reaps nor answers.
            rustix::process::kill_process_group(
                rustix::process::Pid::from_raw(pane.try_into().unwrap()).unwrap(),
                rustix::process::Signal::KILL,
            )
            .unwrap();
            super::relink::unanswered_twice(registry, owner, "cat").await;
            let shown = owned().show("cat").await.unwrap();
            assert_eq!(shown.status, TerminalStatus::Running);
        }
        let exited = poll("the end to be learnt", WAIT, || async {
            let shown = owned().show("cat").await.unwrap();
            (!shown.status.is_running()).then_some(shown.status)
        })
        .await;
        assert_eq!(
            exited,
            TerminalStatus::Exited {
                exit: ExitStatus::Signal(9)
            }
        );
    })
    .await;
}
