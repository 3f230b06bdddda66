//! The warm pool: spawns started in pre-started servers, each used by
//! one terminal only, refilled, and nothing left once the backend goes.

use std::sync::Arc;
use std::time::Duration;

use tmux_engine::backend::{TmuxBackend, TmuxConfig};
use tmux_engine::registry::{
    Backend, OwnerId, Registry, RegistryConfig, SendRequest, TerminalStatus, WaitFor,
};
use tmux_engine::vocab::ExitStatus;

use super::{Cleanup, WAIT, assert_clean, runtime, server_dirs, sh};
use crate::support::{poll, tmux, within};

#[tokio::test]
async fn spawns_take_pooled_servers_once_each_and_nothing_outlives_the_backend() {
    within(async {
        let dir = crate::support::test_dir();
        let rt = runtime(dir.path());
        // A failing test leaves no server running (dispose is on the happy path).
        let _guard = Cleanup(rt.clone());
        // The first spawn starts fresh and fills the pool behind it.
        let (registry, tmux_backend, alice) = open_filled(&rt, &dir.path().join("state")).await;
        let bob = OwnerId::new("bob").unwrap();
        assert_eq!(server_dirs(&rt).len(), 3);
        let pooled = server_dirs(&rt);
        // Waiting servers die with the engine's control client; the
        // terminal's own server does not.
        let dies: Vec<String> = pooled
            .iter()
            .map(|dir| server_option(dir, "exit-unattached"))
            .collect();
        assert_eq!(dies.iter().filter(|v| *v == "on").count(), 2, "{dies:?}");
        // Two owners take one pooled server each, with their own program,
        // environment, cwd and size.
        let mut ids = Vec::new();
        for (owner, word) in [(&alice, "alpha"), (&bob, "bravo")] {
            let spec = sh("echo \"$WORD:$(pwd)\"; exec cat")
                .name(word)
                .env("WORD", word)
                .cwd("/tmp")
                .size(100, 30);
            let snapshot = registry.owner(owner).spawn(spec).await.unwrap();
            let screen = poll("the pooled program's output", WAIT, || async {
                let screen = registry.owner(owner).screen(word).await.unwrap();
                screen.contains(&format!("{word}:/tmp")).then_some(screen)
            })
            .await;
            assert_eq!((screen.size().cols, screen.size().rows), (100, 30));
            assert!(snapshot.pid.is_some());
            ids.push(snapshot.id);
        }
        // Neither of them started a server of its own: they run in the
        // servers that were waiting, and refills are new servers.
        poll("the pool to refill", WAIT, || async {
            (tmux_backend.pooled() == 2).then_some(())
        })
        .await;
        assert_eq!(server_dirs(&rt).len(), 5);
        // The two servers that were waiting now carry the two terminals'
        // ids: the spawns ran in them, one each.
        let now = server_dirs(&rt);
        assert!(pooled.iter().all(|dir| now.contains(dir)));
        let mut stamped: Vec<String> = pooled
            .iter()
            .map(|dir| id_mark(dir))
            .filter(|id| ids.iter().any(|t| t.as_str() == id))
            .collect();
        stamped.sort();
        // Taken, a server outlives the engine like any terminal's.
        for dir in pooled
            .iter()
            .filter(|dir| ids.iter().any(|t| t.as_str() == id_mark(dir)))
        {
            assert_eq!(server_option(dir, "exit-unattached"), "off");
        }
        let mut want: Vec<String> = ids.iter().map(|id| id.as_str().to_owned()).collect();
        want.sort();
        assert_eq!(stamped, want);
        // Pooled servers are no terminals.
        assert_eq!(registry.owner(&alice).list().await.unwrap().len(), 2);
        assert_eq!(registry.owner(&bob).list().await.unwrap().len(), 1);
        // A killed terminal's server goes; it is not put back.
        assert!(registry.owner(&bob).kill("bravo").await.unwrap());
        poll("the killed terminal's server to go", WAIT, || async {
            (server_dirs(&rt).len() == 4).then_some(())
        })
        .await;
        registry.dispose().await.unwrap();
        drop((registry, tmux_backend));
        assert_clean(&rt).await;
    })
    .await;
}

/// A registry on a tmux backend with a pool of two (`/bin/sh`, no reap
/// grace), runtime `rt`, state directory `state`, the relay `relay`
/// (which is also the exit handshake's wrapper and the pool's launcher;
/// `None`: none, as the tests' own executable is not the engine's, so
/// output rides `%output` and the wrapper and launcher are `/bin/sh`);
/// the backend to count its pool.
async fn open_pooled(
    rt: &std::path::Path,
    state: &std::path::Path,
    relay: Option<&std::path::Path>,
) -> (Registry, Arc<TmuxBackend>) {
    let mut config = TmuxConfig::new(rt)
        .shell("/bin/sh")
        .reap_grace(Duration::ZERO)
        .pool_size(2)
        .with_state_dir(state);
    if let Some(relay) = relay {
        config = config.relay(relay);
    }
    let tmux_backend = Arc::new(TmuxBackend::with_tmux(tmux(), config).unwrap());
    let backend: Arc<dyn Backend> = tmux_backend.clone();
    let (registry, _) = Registry::open_with(RegistryConfig::default().state_dir(state), backend)
        .await
        .unwrap();
    (registry, tmux_backend)
}

/// [`open_pooled`] with no relay, alice's terminal `first` (`exec cat`) spawned
/// and the pool filled behind it.
async fn open_filled(
    rt: &std::path::Path,
    state: &std::path::Path,
) -> (Registry, Arc<TmuxBackend>, OwnerId) {
    open_filled_with(rt, state, None).await
}

/// [`open_filled`] with the relay `relay` (see [`open_pooled`]).
async fn open_filled_with(
    rt: &std::path::Path,
    state: &std::path::Path,
    relay: Option<&std::path::Path>,
) -> (Registry, Arc<TmuxBackend>, OwnerId) {
    let (registry, tmux_backend) = open_pooled(rt, state, relay).await;
    let alice = OwnerId::new("alice").unwrap();
    registry
        .owner(&alice)
        .spawn(sh("exec cat").name("first"))
        .await
        .unwrap();
    poll("the pool to fill", WAIT, || async {
        (tmux_backend.pooled() == 2).then_some(())
    })
    .await;
    (registry, tmux_backend, alice)
}

/// The `@tmux-engine-id` a server carries.
fn id_mark(dir: &std::path::Path) -> String {
    server_option(dir, "@tmux-engine-id")
}

/// The value of server option `name` of the server in `dir`.
fn server_option(dir: &std::path::Path, name: &str) -> String {
    tmux_at(dir, &["show-options", "-sv", name])
}

/// What tmux command `args` prints for the server in `dir`, trimmed.
fn tmux_at(dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("tmux")
        .arg("-S")
        .arg(dir.join("tmux.sock"))
        .args(args)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A reap beside a pool (serve reaps in the background while it serves;
/// another engine may reap the same state directory) leaves the servers
/// waiting in it alone: they carry the pool's placeholder id and no
/// record, and have no spawn lock, so before they were taken for spawns
/// their spawner abandoned (young) or for unclaimed servers (old).
#[tokio::test]
async fn reaps_beside_a_pool_leave_its_waiting_servers_alone() {
    within(async {
        let dir = crate::support::test_dir();
        let rt = runtime(dir.path());
        // A failing test leaves no server running (dispose is on the happy path).
        let _guard = Cleanup(rt.clone());
        let state = dir.path().join("state");
        let open = |config: TmuxConfig| {
            let backend = Arc::new(TmuxBackend::with_tmux(tmux(), config).unwrap());
            let dyn_backend: Arc<dyn Backend> = backend.clone();
            let state = state.clone();
            async move {
                let config = RegistryConfig::default().state_dir(state);
                let (registry, _) = Registry::open_with(config, dyn_backend).await.unwrap();
                (registry, backend)
            }
        };
        let config = || TmuxConfig::new(&rt).shell("/bin/sh").with_state_dir(&state);
        // No grace: the pool's own reap judges its servers at once.
        let (pooling, pool) = open(config().reap_grace(Duration::ZERO).pool_size(2)).await;
        let alice = OwnerId::new("alice").unwrap();
        pooling
            .owner(&alice)
            .spawn(sh("exec cat").name("first"))
            .await
            .unwrap();
        poll("the pool to fill", WAIT, || async {
            (pool.pooled() == 2).then_some(())
        })
        .await;
        let before = server_dirs(&rt);
        assert_eq!(before.len(), 3);
        // Another engine's reap, by the default grace: the waiting servers
        // are young, of no record and no spawn lock.
        let (other, _) = open(config()).await;
        let report = other.reap().await.unwrap();
        assert!(report.removed.is_empty(), "{report:?}");
        // The pool's own reap: its waiting servers are old by now.
        let report = pooling.reap().await.unwrap();
        assert!(report.removed.is_empty(), "{report:?}");
        assert_eq!(server_dirs(&rt), before);
        assert_eq!(pool.pooled(), 2);
        // And a spawn still runs in one of them.
        pooling
            .owner(&alice)
            .spawn(sh("exec cat").name("second"))
            .await
            .unwrap();
        assert!(before.iter().all(|dir| server_dirs(&rt).contains(dir)));
        other.dispose().await.unwrap();
        pooling.dispose().await.unwrap();
        drop((other, pooling, pool));
        assert_clean(&rt).await;
    })
    .await;
}

/// Pooled servers killed from outside (SIGKILL, the OOM killer) are no
/// spawn's failure: a spawn drops the dead ones, starts fresh, and the
/// pool refills; nothing of the dead ones is left.
#[tokio::test]
async fn spawns_pass_over_pooled_servers_that_died() {
    within(async {
        let dir = crate::support::test_dir();
        let rt = runtime(dir.path());
        // A failing test leaves no server running (dispose is on the happy path).
        let _guard = Cleanup(rt.clone());
        let (registry, tmux_backend, alice) = open_filled(&rt, &dir.path().join("state")).await;
        let owned = || registry.owner(&alice);
        let first = server_dirs(&rt);
        let pooled: Vec<_> = first
            .iter()
            .filter(|dir| server_option(dir, "exit-unattached") == "on")
            .cloned()
            .collect();
        assert_eq!(pooled.len(), 2, "{first:?}");
        for dir in &pooled {
            let pid: i32 = tmux_at(dir, &["display-message", "-p", "#{pid}"])
                .parse()
                .unwrap();
            let pid = rustix::process::Pid::from_raw(pid).unwrap();
            rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
        }
        poll("the pooled servers to die", WAIT, || async {
            pooled
                .iter()
                .all(|dir| tmux_at(dir, &["display-message", "-p", "up"]).is_empty())
                .then_some(())
        })
        .await;
        // Both spawns start: in fresh servers or refilled pooled ones,
        // never in the dead.
        for name in ["second", "third"] {
            owned()
                .spawn(sh(&format!("echo {name}-ran; exec cat")).name(name))
                .await
                .unwrap();
            poll("the program's output", WAIT, || async {
                let screen = owned().screen(name).await.unwrap();
                screen.contains(&format!("{name}-ran")).then_some(())
            })
            .await;
        }
        poll("the dead servers' directories to go", WAIT, || async {
            pooled.iter().all(|dir| !dir.exists()).then_some(())
        })
        .await;
        for name in ["first", "second", "third"] {
            assert!(owned().kill(name).await.unwrap());
        }
        registry.dispose().await.unwrap();
        drop((registry, tmux_backend));
        assert_clean(&rt).await;
    })
    .await;
}

/// Sends `owner`'s terminal `name` an empty line, and waits for its
/// program to end (it reads one, then exits): the terminal then.
async fn end_with_a_line(
    registry: &Registry,
    owner: &OwnerId,
    name: &str,
) -> tmux_engine::registry::TerminalSnapshot {
    let line = SendRequest {
        submit: true,
        wait: WaitFor::None,
        ..SendRequest::default()
    };
    let sent = registry.owner(owner).send(name, line).await.unwrap();
    sent.result().await.unwrap();
    poll("the program to exit", WAIT, || async {
        let shown = registry.owner(owner).show(name).await.unwrap();
        (!shown.status.is_running()).then_some(shown)
    })
    .await
}

/// The pane pid of the pooled server in `dir` (its first pane).
fn pane_pid(dir: &std::path::Path) -> String {
    tmux_at(dir, &["list-panes", "-t", "%0", "-F", "#{pane_pid}"])
}

/// A pooled server waits with a launcher in its pane: a spawn starts its
/// program there, in the same process tmux started (no `respawn-pane`),
/// with the environment exactly (quotes, `$`, a line break), the cwd, the
/// exit tail and the exit status a fresh server gives. An environment
/// name `sh` cannot assign still spawns, respawned as before (whether it
/// reaches the program is the wrapper's shell's business: dash drops it).
#[tokio::test]
async fn pooled_spawns_start_their_program_in_the_waiting_pane() {
    pooled_spawns_start_in_the_waiting_pane(None).await;
}

/// The same with the relay's launcher, which carries any name and the
/// program's exact status.
#[tokio::test]
async fn pooled_spawns_start_their_program_in_the_relays_launcher() {
    let relay = std::path::PathBuf::from(env!("CARGO_BIN_EXE_tmux-engine-relay"));
    pooled_spawns_start_in_the_waiting_pane(Some(&relay)).await;
}

/// See [`pooled_spawns_start_their_program_in_the_waiting_pane`]; `relay`
/// is the launcher (`None`: `/bin/sh`).
async fn pooled_spawns_start_in_the_waiting_pane(relay: Option<&std::path::Path>) {
    within(async {
        let dir = crate::support::test_dir();
        let rt = runtime(dir.path());
        // A failing test leaves no server running (dispose is on the happy path).
        let _guard = Cleanup(rt.clone());
        let (registry, tmux_backend, alice) =
            open_filled_with(&rt, &dir.path().join("state"), relay).await;
        let owned = || registry.owner(&alice);
        let waiting: Vec<(std::path::PathBuf, String)> = server_dirs(&rt)
            .into_iter()
            .filter(|dir| id_mark(dir) == "t-0-0000000000000000")
            .map(|dir| {
                let pid = pane_pid(&dir);
                (dir, pid)
            })
            .collect();
        assert_eq!(waiting.len(), 2, "{waiting:?}");
        let value = "it's \"$HOME\" `x`\nline two";
        let spec = sh("printf '[%s]' \"$V\"; pwd; read -r _; printf 'last words'; exit 7")
            .name("launched")
            .env("V", value)
            .cwd("/tmp");
        let snapshot = owned().spawn(spec).await.unwrap();
        let (taken, launcher) = waiting
            .iter()
            .find(|(dir, _)| id_mark(dir) == snapshot.id.as_str())
            .expect("the spawn took a waiting server");
        // The program runs under the pane's own first process, the
        // launcher asked for.
        assert_eq!(&pane_pid(taken), launcher, "the pane was respawned");
        let cmdline = std::fs::read(format!("/proc/{launcher}/cmdline")).unwrap();
        let first = cmdline.split(|&b| b == 0).next().unwrap_or_default();
        let want = relay.unwrap_or(std::path::Path::new("/bin/sh"));
        assert_eq!(first, want.as_os_str().as_encoded_bytes());
        // Its environment does not stay on disk.
        assert!(!taken.join("launch.sh").exists());
        assert!(!taken.join("launch.spec").exists());
        let program = snapshot.pid.expect("a pid");
        // `pid (comm) state ppid ...`
        let parent = std::fs::read_to_string(format!("/proc/{program}/stat"))
            .ok()
            .and_then(|stat| Some(stat.rsplit(')').next()?.split_whitespace().nth(1)?.to_owned()))
            .unwrap_or_default();
        assert!(
            parent == *launcher,
            "the program {program} is not the launcher's child (parent {parent}, launcher {launcher})"
        );
        // Running until it reads a line: ended by one now.
        let dead = end_with_a_line(&registry, &alice, "launched").await;
        assert_eq!(
            dead.status,
            TerminalStatus::Exited {
                exit: ExitStatus::Code(7)
            }
        );
        let output = owned().output_since("launched", None).await.unwrap();
        let text = String::from_utf8_lossy(&output.bytes).replace("\r\n", "\n");
        // The value and cwd, then (after the echoed line) the exit tail.
        assert!(text.contains(&format!("[{value}]/tmp\n")), "{text:?}");
        assert!(text.contains("\nlast words"), "{text:?}");
        // A name sh cannot assign: respawned under the shell's launcher,
        // as before it (whether the name reaches the program is the
        // wrapper's shell's business: dash drops it); launched by the
        // relay's, which carries it.
        let odd = sh("echo odd-ran; read -r _; exit 130")
            .name("odd")
            .env("A-B", "dash");
        let odd = owned().spawn(odd).await.unwrap();
        let (taken, launcher) = waiting
            .iter()
            .find(|(dir, _)| id_mark(dir) == odd.id.as_str())
            .expect("the spawn took a waiting server");
        assert_eq!(&pane_pid(taken) == launcher, relay.is_some(), "respawned");
        poll("the odd program's output", WAIT, || async {
            owned()
                .screen("odd")
                .await
                .unwrap()
                .contains("odd-ran")
                .then_some(())
        })
        .await;
        if relay.is_some() {
            let program = odd.pid.expect("a pid");
            let entry = crate::support::environ_entry(program, "A-B");
            assert_eq!(entry.as_deref(), Some("A-B=dash"));
        }
        let dead = end_with_a_line(&registry, &alice, "odd").await;
        if relay.is_some() {
            // The relay's wrapper has the exact status: `exit 130` is no
            // SIGINT (the shell's re-raises every status above 128).
            assert_eq!(
                dead.status,
                TerminalStatus::Exited {
                    exit: ExitStatus::Code(130)
                }
            );
        }
        registry.dispose().await.unwrap();
        drop((registry, tmux_backend));
        assert_clean(&rt).await;
    })
    .await;
}
