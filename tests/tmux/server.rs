//! Live tests of `tmux::server`: lifecycle, hermetic config, sizes, names.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tmux_engine::ErrorCode;
use tmux_engine::tmux::MARK_OPTION;
use tmux_engine::tmux::process::is_alive;
use tmux_engine::tmux::{DIR_PREFIX, MAX_SOCKET_PATH};
use tmux_engine::tmux::{Server, Tmux, TmuxCommand};
use tmux_engine::vocab::Size;

use crate::support::{Control, environ_entry, live, opts, poll, sh_c, start_server, tmux};

const WAIT: Duration = Duration::from_secs(10);

/// The pane's program gets SIGHUP from the dying server, a moment later.
async fn assert_pane_gone(pane_pid: u32) {
    poll("the pane's program to exit", WAIT, || async {
        (!is_alive(pane_pid)).then_some(())
    })
    .await;
}

/// Waits until pane `pid` runs `sleep`: until tmux's forked child has
/// exec'd its program, `/proc/PID/environ` is still the server's (a read
/// in between, on a loaded machine, found the server's `GLIBC_TUNABLES`
/// in "the pane").
async fn exec_sleep(pid: u32) {
    poll("the pane to exec sleep", WAIT, || async {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|comm| comm.trim_end() == "sleep")
            .then_some(())
    })
    .await;
}

fn assert_gone(pid: u32, dir: &Path) {
    assert!(!is_alive(pid), "tmux server {pid} still running");
    assert!(
        !dir.exists(),
        "server directory {} left behind",
        dir.display()
    );
}

async fn list_panes(server: &Server, format: &str) -> String {
    let cmd = TmuxCommand::new("list-panes")
        .target(format!("{}:", server.session()))
        .opt("-F", format);
    server
        .run(&cmd)
        .await
        .expect("list-panes")
        .trim_end()
        .to_owned()
}

#[tokio::test]
async fn start_then_kill_removes_process_and_directory() {
    live(async |tmp| {
        let server = start_server(
            opts(tmp.path())
                .size(Size {
                    cols: 100,
                    rows: 30,
                })
                .history_limit(1234),
        )
        .await;
        let (pid, dir, socket) = (
            server.pid(),
            server.dir().to_owned(),
            server.socket().to_owned(),
        );
        assert!(is_alive(pid));
        assert!(server.is_alive());
        assert!(socket.exists(), "no socket at {}", socket.display());
        let mode = std::fs::metadata(&dir).expect("dir").permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "directory mode {mode:o}");
        let dir_name = dir
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        assert!(dir_name.starts_with(DIR_PREFIX), "{dir_name}");
        assert_eq!(server.session(), "=main");
        assert!(is_alive(server.first_pane().pid));

        let mark = TmuxCommand::new("show-options")
            .flag("-s")
            .flag("-v")
            .arg(MARK_OPTION);
        let mark = server.run(&mark).await.expect("show mark");
        assert_eq!(mark.trim(), "1");

        let pane = list_panes(
            &server,
            "#{pane_id} #{pane_pid} #{pane_width}x#{pane_height} #{history_limit} #{pane_in_mode}",
        )
        .await;
        let first = server.first_pane();
        assert_eq!(pane, format!("{} {} 100x30 1234 0", first.id, first.pid));

        server.kill().await.expect("killing tmux");
        assert_gone(pid, &dir);
        assert_pane_gone(first.pid).await;
    })
    .await;
}

#[tokio::test]
async fn drop_kills_server() {
    live(async |tmp| {
        let server = start_server(opts(tmp.path())).await;
        let (pid, dir) = (server.pid(), server.dir().to_owned());
        let pane = server.first_pane().pid;
        drop(server);
        assert_gone(pid, &dir);
        assert_pane_gone(pane).await;
    })
    .await;
}

#[tokio::test]
async fn drop_during_panic_kills_server() {
    live(async |tmp| {
        let server = start_server(opts(tmp.path())).await;
        let (pid, dir) = (server.pid(), server.dir().to_owned());
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
            let _server = server;
            panic!("deliberate panic while holding a server");
        }));
        assert!(caught.is_err());
        assert_gone(pid, &dir);

        let server = start_server(opts(tmp.path())).await;
        let (pid, dir) = (server.pid(), server.dir().to_owned());
        let joined = std::thread::spawn(move || {
            let _server = server;
            panic!("deliberate panic in a thread holding a server");
        })
        .join();
        assert!(joined.is_err());
        assert_gone(pid, &dir);
    })
    .await;
}

#[tokio::test]
async fn user_config_is_never_read() {
    live(async |tmp| {
        let home = tmp.path().join("home");
        let xdg = home.join("xdg");
        std::fs::create_dir_all(xdg.join("tmux")).expect("mkdir");
        let evil = "set -g status-left CANARY\nset -g @canary yes\nset -g remain-on-exit off\n";
        std::fs::write(home.join(".tmux.conf"), evil).expect("write");
        std::fs::write(xdg.join("tmux/tmux.conf"), evil).expect("write");
        let server = start_server(opts(tmp.path()).server_env(vec![
            ("HOME".into(), home.into()),
            ("XDG_CONFIG_HOME".into(), xdg.into()),
        ]))
        .await;
        let show = |name: &str| {
            TmuxCommand::new("show-options")
                .flag("-g")
                .flag("-q")
                .flag("-v")
                .arg(name)
        };
        let left = server.run(&show("status-left")).await.expect("show");
        assert!(!left.contains("CANARY"), "user config was read: {left}");
        assert_eq!(server.run(&show("@canary")).await.expect("show").trim(), "");
        assert_eq!(
            server
                .run(&show("remain-on-exit"))
                .await
                .expect("show")
                .trim(),
            "on"
        );
        assert_eq!(
            server.run(&show("status")).await.expect("show").trim(),
            "off"
        );
        server.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn dead_pane_keeps_exit_status_on_live_server() {
    live(async |tmp| {
        let server = start_server(opts(tmp.path()).command(sh_c("exit 3", &[]))).await;
        // pane_dead is set at EOF, pane_dead_status once the child is reaped;
        // tmux 3.3a sometimes loses that SIGCHLD, hence the nudge.
        poll("the pane to die with status 3", WAIT, || async {
            match list_panes(&server, "#{pane_dead} #{pane_dead_status}")
                .await
                .as_str()
            {
                "1 3" => Some(()),
                // Dead without a status (trim_end ate the space).
                "1" => {
                    server.nudge_child_reaper().expect("SIGCHLD");
                    None
                }
                _ => None,
            }
        })
        .await;
        assert!(server.is_alive(), "the server must outlive its program");
        server.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn killing_the_session_ends_the_server() {
    live(async |tmp| {
        let server = start_server(opts(tmp.path())).await;
        let kill = TmuxCommand::new("kill-session").target(server.session());
        server.run(&kill).await.expect("kill-session");
        // exit-empty on: no session, no server; "gone" is unambiguous.
        let pid = server.pid();
        poll("the server to exit", WAIT, || async {
            (!is_alive(pid)).then_some(())
        })
        .await;
        server.kill().await.expect("kill after exit");
    })
    .await;
}

#[tokio::test]
async fn too_long_socket_path_is_refused_before_starting() {
    live(async |tmp| {
        let deep = tmp.path().join("d".repeat(MAX_SOCKET_PATH));
        let err = Server::start(tmux(), opts(tmp.path()).runtime_dir(Some(deep.clone())))
            .await
            .expect_err("socket path is too long");
        assert_eq!(err.code(), ErrorCode::SocketPathTooLong);
        assert!(
            err.to_string().contains(&deep.display().to_string()),
            "{err}"
        );
        let left: Vec<_> = std::fs::read_dir(&deep)
            .expect("read runtime dir")
            .collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    })
    .await;
}

#[tokio::test]
async fn window_size_stays_fixed_when_a_client_claims_another() {
    live(async |tmp| {
        let server = start_server(opts(tmp.path()).size(Size {
            cols: 100,
            rows: 30,
        }))
        .await;
        let mut control = Control::attach(&server).await;
        let claim = control.cmd("refresh-client -C 50x10").await;
        assert!(claim.ok, "{}", claim.text());
        let size = control
            .cmd("list-windows -F \"#{window_width}x#{window_height}\"")
            .await;
        assert_eq!(size.text(), "100x30");
        control.close().await;
        server.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn options_reach_the_pane() {
    live(async |tmp| {
        let out = tmp.path().join("out");
        let work = tmp.path().join("work #1 $HOME");
        std::fs::create_dir(&work).expect("mkdir");
        let server = start_server(
            opts(tmp.path())
                .cwd(Some(work.clone()))
                .env(vec![("K".into(), "v; $HOME #{x}".into())])
                .command(sh_c(
                    "{ pwd; printf '%s\\n' \"$K\" \"$1\"; } > \"$2\"",
                    &["arg;".as_ref(), out.as_os_str()],
                )),
        )
        .await;
        let want = format!("{}\nv; $HOME #{{x}}\narg;\n", work.display());
        poll("the program's output", WAIT, || async {
            std::fs::read_to_string(&out).ok().filter(|s| *s == want)
        })
        .await;
        server.kill().await.expect("kill");

        // A pinned shell with no command is the pane's program.
        let server = start_server(opts(tmp.path())).await;
        // Polled: right after the start the pane pid can still be tmux's
        // fork, before its exec.
        let sh = std::fs::canonicalize("/bin/sh").expect("/bin/sh");
        let exe = format!("/proc/{}/exe", server.first_pane().pid);
        poll("the pane to exec the pinned shell", WAIT, || async {
            (std::fs::read_link(&exe).ok()? == sh).then_some(())
        })
        .await;
        server.kill().await.expect("kill");
    })
    .await;
}

#[tokio::test]
async fn accepted_names_address_exactly_their_session() {
    live(async |tmp| {
        for name in [
            "build #3",
            "x#{pane_id}",
            "{last}",
            "%1",
            "@1",
            "~x",
            "a;b",
            "'q'",
            "é名",
            "!",
        ] {
            let server = Server::start(tmux(), opts(tmp.path()).session(name.into()))
                .await
                .unwrap_or_else(|e| panic!("starting session {name:?}: {e}"));
            let has = TmuxCommand::new("has-session").target(server.session());
            server
                .run(&has)
                .await
                .unwrap_or_else(|e| panic!("{name:?}: {e}"));
            assert_eq!(list_panes(&server, "#{session_name}").await, name);
            server.kill().await.expect("kill");
        }
        // Exact: a prefix of the name does not match.
        let server = start_server(opts(tmp.path())).await;
        let prefix = TmuxCommand::new("has-session").target("=mai");
        let err = server
            .run(&prefix)
            .await
            .expect_err("prefix must not match");
        assert_eq!(err.code(), ErrorCode::CommandFailed);
        assert!(err.to_string().contains("can't find session"), "{err}");
        server.kill().await.expect("kill");
    })
    .await;
}

/// A tmux that starts a real server for `new-session`, writes the server's
/// pid to `pid_file`, then says `garbage` in place of its report (or stays
/// silent when `hang`).
fn half_broken_tmux(dir: &Path, pid_file: &Path, hang: bool) -> Tmux {
    let fake = dir.join(if hang { "tmux-hang" } else { "tmux-garbage" });
    // In place of the start's report line (it begins with the server pid):
    // garbage, or nothing more at all while the real client goes on.
    let then = if hang {
        "exec cat >/dev/null"
    } else {
        "echo garbage"
    };
    let script = format!(
        "#!/bin/sh\ncase \" $* \" in\n*\" new-session \"*)\n  \"{real}\" \"$@\" | while IFS= read -r line; do\n    case \"$line\" in\n    [0-9]*) echo \"${{line%% *}}\" > \"{pid}.tmp\"; mv \"{pid}.tmp\" \"{pid}\"; {then} ;;\n    *) printf '%s\\n' \"$line\" ;;\n    esac\n  done ;;\n*) exec \"{real}\" \"$@\" ;;\nesac\n",
        real = tmux().path().display(),
        pid = pid_file.display(),
    );
    crate::support::write_script(&fake, &script);
    Tmux::with_version(&fake, tmux().version()).expect("supported")
}

fn read_pid(pid_file: &Path) -> u32 {
    std::fs::read_to_string(pid_file)
        .expect("pid file")
        .trim()
        .parse()
        .expect("a pid")
}

fn assert_runtime_dir_empty(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir.join("rt"))
        .expect("runtime dir")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[tokio::test]
async fn failed_start_leaves_nothing_behind() {
    live(async |tmp| {
        let pid_file = tmp.path().join("server-pid");
        let fake = half_broken_tmux(tmp.path(), &pid_file, false);
        let err = Server::start(Arc::new(fake), opts(tmp.path()))
            .await
            .expect_err("garbage output");
        assert_eq!(err.code(), ErrorCode::CommandFailed);
        assert!(err.to_string().contains("garbage"), "{err}");
        let pid = read_pid(&pid_file);
        assert!(
            !is_alive(pid),
            "the half-started server {pid} is still running"
        );
        assert_runtime_dir_empty(tmp.path());
    })
    .await;
}

#[tokio::test]
async fn cancelled_start_leaves_nothing_behind() {
    live(async |tmp| {
        let pid_file = tmp.path().join("server-pid");
        let fake = half_broken_tmux(tmp.path(), &pid_file, true);
        let start = Server::start(Arc::new(fake), opts(tmp.path()));
        // Drop the start once the server exists (its tmux client hangs).
        tokio::select! {
            res = start => panic!("start finished: {res:?}"),
            () = poll("the server to start", WAIT, || async { pid_file.exists().then_some(()) }) => {}
        }
        let pid = read_pid(&pid_file);
        assert!(!is_alive(pid), "the cancelled server {pid} is still running");
        assert_runtime_dir_empty(tmp.path());
    })
    .await;
}

/// The watch behind `run` and the fixture: when its owner is gone (its
/// pipe closes), a server still running gets SIGKILL and the paths go; a
/// pid that names another server's directory is left alone.
#[tokio::test]
async fn a_watch_ends_a_server_its_owner_left_behind() {
    use tmux_engine::tmux::Watch;
    live(async |tmp| {
        let server = start_server(opts(tmp.path())).await;
        let other = start_server(opts(tmp.path())).await;
        let (pid, dir) = (server.pid(), server.dir().to_owned());
        let extra = tmp.path().join("extra");
        std::fs::create_dir(&extra).expect("extra dir");
        // This server keeps running when its owner dies (no exit-unattached),
        // as tmux 3.3a keeps one whose control client had output queued.
        let watch = Watch::start(Some((pid, &dir)), &[&extra]).expect("watch");
        // A watch for the other server's pid that names this one's dir:
        // the pid does not match what it names, so it must not be killed.
        let wrong = Watch::start(Some((other.pid(), &dir)), &[]).expect("watch");
        let wrong_pid = wrong.pid();
        drop((watch, wrong));
        poll(
            "the watch to end the server",
            Duration::from_secs(10),
            || async { (!is_alive(pid) && !extra.exists()).then_some(()) },
        )
        .await;
        // Once the wrong watch is done (a zombie of ours: dropped, not
        // reaped), the other server must still run.
        poll(
            "the wrong watch to finish",
            Duration::from_secs(10),
            || async {
                let stat =
                    std::fs::read_to_string(format!("/proc/{wrong_pid}/stat")).unwrap_or_default();
                let state = stat
                    .rsplit(") ")
                    .next()
                    .and_then(|rest| rest.chars().next());
                matches!(state, None | Some('Z')).then_some(())
            },
        )
        .await;
        assert!(is_alive(other.pid()), "a pid naming another dir was killed");
        drop(server);
        drop(other);
    })
    .await;
}

/// The engine's control attach to a server that was SIGKILLed fails
/// without starting a server on the stale socket: `attach-session` would
/// start one (tmux's `CMD_STARTSERVER`), and while that empty server
/// lived, another process's status check took the dead terminal for a
/// running one (the fault suite's `plain` listed `running`).
#[tokio::test]
async fn a_control_attach_to_a_killed_server_starts_no_server() {
    live(async |tmp| {
        let server = start_server(opts(tmp.path())).await;
        let pid = server.pid();
        tmux_engine::tmux::process::signal(pid, rustix::process::Signal::KILL)
            .expect("SIGKILL the server");
        poll("the server to die", WAIT, || async {
            (!is_alive(pid)).then_some(())
        })
        .await;
        assert!(server.socket().exists(), "SIGKILL leaves the socket file");
        let output = server
            .handle()
            .control_command()
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .expect("run the control attach");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(!output.status.success(), "attached to nothing: {output:?}");
        // A `%begin` would be a server's answer: one was started for it.
        assert!(
            !stdout.contains("%begin"),
            "the attach started a server on the stale socket: {stdout}"
        );
        let refused = std::os::unix::net::UnixStream::connect(server.socket())
            .expect_err("nothing listens on the stale socket");
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
        server
            .kill()
            .await
            .expect("clean up after the killed server");
    })
    .await;
}

#[tokio::test]
async fn the_server_gets_glibc_tunables_and_its_panes_do_not() {
    live(async |tmp| {
        // A cleared environment, so the test's own GLIBC_TUNABLES (if any)
        // cannot stand in for the engine's.
        let server = start_server(
            opts(tmp.path())
                .clear_env(true)
                .command(sh_c("exec sleep 1000", &[])),
        )
        .await;
        // glibc cuts its own copy of the variable at the first `:` as it
        // parses it, so the process shows the first tunable only.
        let tunables = environ_entry(server.pid(), "GLIBC_TUNABLES").expect("the server's");
        assert!(
            tunables.starts_with("GLIBC_TUNABLES=glibc.malloc.tcache_count=0"),
            "{tunables}"
        );
        let pane = server.first_pane().pid;
        exec_sleep(pane).await;
        assert_eq!(environ_entry(pane, "GLIBC_TUNABLES"), None, "the pane's");
        let global = server
            .run(&TmuxCommand::new("show-environment").flag("-g"))
            .await
            .expect("show-environment");
        assert!(!global.contains("GLIBC_TUNABLES="), "{global}");
        server.kill().await.expect("kill");

        // A caller's own value, even empty (the opt-out), is kept as it is
        // in the server and the pane alike.
        let server = start_server(
            opts(tmp.path())
                .clear_env(true)
                .server_env(vec![("GLIBC_TUNABLES".into(), "".into())])
                .command(sh_c("exec sleep 1000", &[])),
        )
        .await;
        assert_eq!(
            environ_entry(server.pid(), "GLIBC_TUNABLES").as_deref(),
            Some("GLIBC_TUNABLES=")
        );
        let pane = server.first_pane().pid;
        exec_sleep(pane).await;
        assert_eq!(
            environ_entry(pane, "GLIBC_TUNABLES").as_deref(),
            Some("GLIBC_TUNABLES=")
        );
        server.kill().await.expect("kill");
    })
    .await;
}
