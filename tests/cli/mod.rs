//! The `tmux-engine` binary's registry commands, run as a user would: each
//! invocation a new process on one state directory, terminals persisting
//! between them.
#![allow(clippy::unwrap_used)]

mod allocator;
mod argv;
mod attach_cli;
mod decode_cli;
mod durations_cli;
mod run_cli;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use tempfile::TempDir;

/// A state and runtime directory for one test, and the binary bound to it.
/// Fields drop in order: the servers die while their sockets still exist.
pub(crate) struct Cli {
    _cleanup: Cleanup,
    dir: TempDir,
}

impl Cli {
    /// Fresh state and runtime directories.
    pub(crate) fn new() -> Cli {
        let dir = crate::support::test_dir();
        Cli {
            _cleanup: Cleanup(dir.path().join("rt")),
            dir,
        }
    }

    /// The binary with `args`, bound to this test's directories, owner
    /// `tester` and `/bin/sh`; stdin is null.
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let runtime = self.dir.path().join("rt");
        std::fs::create_dir_all(&runtime).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_tmux-engine"));
        command
            .args(args)
            .env("TMUX_ENGINE_STATE_DIR", self.dir.path().join("state"))
            .env("XDG_RUNTIME_DIR", &runtime)
            // It would take precedence over XDG_RUNTIME_DIR (issue 14).
            .env_remove("TMUX_ENGINE_RUNTIME_DIR")
            .env("TMUX_ENGINE_SHELL", "/bin/sh")
            .env("TMUX_ENGINE_OWNER", "tester")
            // No warm pool: tests count the servers a serve starts; the
            // pool has its own (tests/backend/pool.rs, bridge::pool).
            .env("TMUX_ENGINE_POOL", "0")
            // `serve` and `mcp` restart themselves with glibc's settings
            // unless it names its own (cli/allocator.rs): not the runner's.
            .env_remove("GLIBC_TUNABLES")
            .stdin(Stdio::null());
        command
    }

    /// Runs to the end, capturing stdout and stderr.
    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// Runs and expects success; returns stdout.
    pub(crate) fn ok(&self, args: &[&str]) -> String {
        self.ok_with(args, |_| {})
    }

    /// [`ok`](Cli::ok) with the command changed by `change` first (its
    /// environment, say).
    pub(crate) fn ok_with(&self, args: &[&str], change: impl FnOnce(&mut Command)) -> String {
        let mut command = self.command(args);
        change(&mut command);
        let output = command.output().unwrap();
        assert!(
            output.status.success(),
            "{args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// The runtime directory the servers live under.
    pub(crate) fn runtime(&self) -> std::path::PathBuf {
        self.dir.path().join("rt")
    }

    /// The state directory the commands use.
    pub(crate) fn state(&self) -> std::path::PathBuf {
        self.dir.path().join("state")
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        kill_servers(&self.0);
    }
}

/// The tmux sockets under a runtime directory.
pub(crate) fn sockets(dir: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir).map_or_else(
        |_| Vec::new(),
        |entries| {
            entries
                .flatten()
                .flat_map(|entry| {
                    let path = entry.path();
                    let socket = path.join("tmux.sock");
                    if socket.exists() {
                        vec![socket]
                    } else if path.is_dir() {
                        sockets(&path)
                    } else {
                        Vec::new()
                    }
                })
                .collect()
        },
    )
}

/// Kills every server under a runtime directory, so a failing test leaves
/// nothing running (a passing one has killed its own already). Every tmux
/// process started on a socket under `dir` (a server or a control client:
/// each names its socket in its argv) still there 2 s after `kill-server`
/// is SIGKILLed: tmux keeps running while a client it cannot flush to
/// stays connected (a control client whose reader was SIGKILLed), and a
/// leftover holding the test's output pipe would keep `cargo test` from
/// ever finishing. They are found by argv, not by asking the server its
/// pid: a pool server already exiting (its session gone, its client stuck)
/// answers no `display-message`, and such servers outlived every run.
fn kill_servers(dir: &Path) {
    let processes = tmux_processes_under(dir);
    for socket in sockets(dir) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .arg("kill-server")
            .stderr(Stdio::null())
            .status();
    }
    let alive = |pid: &u32| Path::new(&format!("/proc/{pid}")).exists();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while processes.iter().any(alive) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    for pid in processes.iter().filter(|pid| alive(pid)) {
        eprintln!("tmux process {pid} outlived kill-server; SIGKILL");
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
}

/// The tmux processes (servers and clients) whose `-S` socket lies under
/// `dir`, by their command lines.
fn tmux_processes_under(dir: &Path) -> Vec<u32> {
    use std::os::unix::ffi::OsStrExt as _;
    let prefix = dir.as_os_str().as_bytes();
    processes_where(|cmdline| {
        let argv: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        let tmux = argv
            .first()
            .and_then(|program| program.rsplit(|&b| b == b'/').next())
            == Some(b"tmux".as_slice());
        tmux && argv
            .windows(2)
            .any(|pair| pair[0] == b"-S" && pair[1].starts_with(prefix))
    })
}

/// The pids of the processes whose `/proc/PID/cmdline` (NUL-separated)
/// `keep` accepts.
pub(crate) fn processes_where(mut keep: impl FnMut(&[u8]) -> bool) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            keep(&cmdline).then_some(pid)
        })
        .collect()
}

/// The pid of the server answering on `socket`, `None` when none does.
pub(crate) fn server_pid(socket: &Path) -> Option<u32> {
    display(socket, "#{pid}")?.parse().ok()
}

/// `format` as the server answering on `socket` expands it
/// (`display-message -p`), trimmed; `None` when no server answers.
pub(crate) fn display(socket: &Path, format: &str) -> Option<String> {
    let out = Command::new("tmux")
        .arg("-S")
        .arg(socket)
        .args(["display-message", "-p", format])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status.success().then_some(())?;
    Some(String::from_utf8(out.stdout).ok()?.trim().to_owned())
}

/// Kills the servers of a [`Cli`]'s runtime directory when dropped.
struct Cleanup(std::path::PathBuf);

/// Server directories left under the test's runtime directory.
pub(crate) fn servers_left(runtime: &Path) -> usize {
    walk(runtime)
}

fn walk(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .map(|entry| {
                let path = entry.path();
                let name = entry.file_name().to_string_lossy().into_owned();
                // The shell rc files (issue 17): one directory, not a server.
                if name.starts_with("tmux-engine-shell-") {
                    return 0;
                }
                if name.starts_with("tmux-engine-registry") {
                    walk(&path)
                } else {
                    usize::from(path.is_dir())
                }
            })
            .sum()
    })
}

#[test]
fn spawn_send_read_kill_round_trip() {
    let cli = Cli::new();
    let id = cli.ok(&["spawn", "--name", "main"]).trim().to_owned();
    assert!(id.starts_with("t-"), "{id}");
    // At the prompt first, so the typed line is not echoed ahead of it.
    cli.ok(&["send", "main", "--wait", "stdin"]);
    let sent = cli.ok(&[
        "send",
        "main",
        "echo round-$((20+1))",
        "--submit",
        "--wait",
        "stdin",
    ]);
    assert!(sent.contains("round-21"), "{sent}");
    let read = cli.ok(&["read", &id, "--count", "5"]);
    assert!(
        read.lines().any(|line| line.ends_with("round-21")),
        "{read}"
    );
    let listed = cli.ok(&["list"]);
    assert!(
        listed.contains(&id) && listed.contains("\tmain\trunning\t"),
        "{listed}"
    );
    assert!(cli.ok(&["screen", "main"]).contains("round-21"));
    cli.ok(&["wait", "main", "--text", "round-21", "--timeout", "5"]);
    assert_eq!(cli.ok(&["kill", "main"]).trim(), "killed");
    assert_eq!(cli.ok(&["list"]), "");
    assert_eq!(servers_left(&cli.runtime()), 0);
}

/// With no `$SHELL` (a CI runner, a systemd unit, `env -i`) a terminal
/// still runs the user's login shell with the engine's integration: the
/// send answers the command's exact output and exit code. Left to tmux,
/// the login shell ran without it, and every send answered `stdin_read`
/// with the echo and the prompt as output.
#[test]
fn without_shell_set_the_login_shell_is_integrated() {
    let cli = Cli::new();
    let bare = |args: &[&str]| {
        cli.ok_with(args, |command| {
            command.env_remove("SHELL").env_remove("TMUX_ENGINE_SHELL");
        })
    };
    bare(&["spawn", "--name", "login"]);
    let answer: serde_json::Value = serde_json::from_str(&bare(&[
        "--json",
        "send",
        "login",
        "echo \"shell:$0\"; (exit 7)",
        "--submit",
    ]))
    .unwrap();
    let login = login_shell();
    let name = Path::new(&login).file_name().unwrap().to_str().unwrap();
    if matches!(name, "bash" | "zsh" | "sh" | "dash" | "ash") {
        assert_eq!(answer["exit_code"], 7, "{answer}");
        assert_eq!(answer["output"], format!("shell:{login}\n"), "{answer}");
    } else {
        // A shell the engine does not integrate with (fish, ...): still
        // the login shell, not tmux's guess.
        let output = answer["output"].as_str().unwrap();
        assert!(output.contains(&format!("shell:{login}")), "{answer}");
    }
    cli.ok(&["kill", "login"]);
}

/// This user's login shell, as `/etc/passwd` names it.
fn login_shell() -> String {
    let uid = rustix::process::getuid().as_raw().to_string();
    std::fs::read_to_string("/etc/passwd")
        .unwrap()
        .lines()
        .map(|line| line.split(':').collect::<Vec<_>>())
        .find(|fields| fields.len() == 7 && fields[2] == uid)
        .map_or_else(|| "/bin/sh".to_owned(), |fields| fields[6].to_owned())
}

#[test]
fn json_output_and_exit_statuses() {
    let cli = Cli::new();
    let spawned: serde_json::Value = serde_json::from_str(&cli.ok(&[
        "--json", "spawn", "--name", "job", "--role", "worker", "--", "sh", "-c", "exit 3",
    ]))
    .unwrap();
    assert_eq!(spawned["name"], "job");
    assert_eq!(spawned["role"], "worker");
    assert_eq!(spawned["owner"], "tester");
    assert_eq!(
        cli.ok(&["wait", "job", "--exit", "--timeout", "10"]).trim(),
        "exited with code 3"
    );
    let shown: serde_json::Value =
        serde_json::from_str(&cli.ok(&["--json", "show", "job"])).unwrap();
    assert_eq!(
        shown["status"],
        serde_json::json!({"kind": "exited", "exit": {"code": 3}})
    );
    let listed: serde_json::Value = serde_json::from_str(&cli.ok(&["--json", "list"])).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    // Another owner cannot see it.
    let foreign = cli.run(&["--owner", "other", "show", spawned["id"].as_str().unwrap()]);
    assert_eq!(foreign.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&foreign.stderr).starts_with("error: FOREIGN_TERMINAL: "));
    cli.ok(&["kill", "job"]);
    assert_eq!(servers_left(&cli.runtime()), 0);
}

#[test]
fn errors_print_codes_and_exit_non_zero() {
    let cli = Cli::new();
    let cases: &[(&[&str], &str, i32)] = &[
        (&["show", "nothing"], "NO_TERMINAL", 1),
        (&["spawn", "--name", "a:b"], "INVALID_INPUT", 1),
        (&["spawn", "--restart", "sometimes"], "INVALID_INPUT", 1),
        (&["spawn", "--size", "0x5"], "INVALID_INPUT", 1),
        (&["spawn", "--env", "NOEQUALS"], "INVALID_INPUT", 1),
    ];
    for (args, code, exit) in cases {
        let output = cli.run(args);
        assert_eq!(output.status.code(), Some(*exit), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.starts_with(&format!("error: {code}: ")),
            "{args:?}: {stderr}"
        );
    }
    let output = cli.run(&["--json", "kill", "nothing"]);
    let error: serde_json::Value = serde_json::from_slice(&output.stderr).unwrap();
    assert_eq!(error["error"]["code"], "NO_TERMINAL");
    cli.ok(&["spawn", "--name", "dup"]);
    let duplicate = cli.run(&["spawn", "--name", "dup"]);
    assert!(String::from_utf8_lossy(&duplicate.stderr).starts_with("error: DUPLICATE_NAME: "));
    let signal = cli.run(&["signal", "dup", "SEGV"]);
    assert!(String::from_utf8_lossy(&signal.stderr).starts_with("error: INVALID_INPUT: "));
    let timeout = cli.run(&[
        "wait",
        "dup",
        "--regex",
        "never-printed",
        "--timeout",
        "0.2",
    ]);
    assert_eq!(timeout.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&timeout.stderr).starts_with("error: TIMEOUT: "));
    let usage = cli.run(&["wait", "dup"]);
    assert_eq!(usage.status.code(), Some(2));
    cli.ok(&["kill", "dup"]);
    assert_eq!(servers_left(&cli.runtime()), 0);
}

#[test]
fn send_from_stdin_delivers_bytes_exactly() {
    let cli = Cli::new();
    let out = cli.dir.path().join("copied");
    let script = format!("stty raw -echo; exec head -c 7 > '{}'", out.display());
    cli.ok(&["spawn", "--name", "raw", "--", "sh", "-c", &script]);
    cli.ok(&["send", "raw", "--wait", "stdin"]);
    let mut child = cli
        .command(&[
            "send",
            "raw",
            "--stdin",
            "--wait",
            "exit",
            "--timeout",
            "10",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), b"a;\"$\x00\n\xff").unwrap();
    assert!(child.wait_with_output().unwrap().status.success());
    assert_eq!(std::fs::read(&out).unwrap(), b"a;\"$\x00\n\xff");
    cli.ok(&["kill", "raw"]);
    assert_eq!(servers_left(&cli.runtime()), 0);
}

#[test]
fn wait_resolves_on_output_and_on_exit() {
    let cli = Cli::new();
    cli.ok(&[
        "spawn",
        "--name",
        "asker",
        "--",
        "sh",
        "-c",
        "read answer; echo got-$answer; read more; exit 4",
    ]);
    // Waiting before the text exists: it resolves when the pane prints it.
    let waiter = cli
        .command(&["wait", "asker", "--text", "got-yes", "--timeout", "20"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    cli.ok(&["send", "asker", "yes", "--submit", "--wait", "none"]);
    let waited = waiter.wait_with_output().unwrap();
    assert!(waited.status.success(), "{waited:?}");
    assert!(String::from_utf8_lossy(&waited.stdout).contains("got-yes"));

    let exit_waiter = cli
        .command(&["wait", "asker", "--exit", "--timeout", "20"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    cli.ok(&["send", "asker", "", "--submit", "--wait", "none"]);
    let exited = exit_waiter.wait_with_output().unwrap();
    assert!(exited.status.success(), "{exited:?}");
    assert_eq!(
        String::from_utf8_lossy(&exited.stdout).trim(),
        "exited with code 4"
    );
    cli.ok(&["kill", "asker"]);
    assert_eq!(servers_left(&cli.runtime()), 0);
}

/// Starts `tmux-engine events NAME` with its stdout and stderr piped; its
/// lines arrive on the receiver, read by the returned thread.
fn spawn_events(
    cli: &Cli,
    name: &str,
) -> (
    std::process::Child,
    std::sync::mpsc::Receiver<String>,
    std::thread::JoinHandle<()>,
) {
    use std::io::BufRead;
    let mut events = cli
        .command(&["events", name])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = events.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    (events, rx, reader)
}

/// Types `ping` into `name` until an output event on `rx` carries it, up to
/// a deadline (`events` attaches on its own schedule); whether one did.
/// Every line must be a JSON event; output events must be pane `%0`'s.
fn typing_shows_in(cli: &Cli, name: &str, rx: &std::sync::mpsc::Receiver<String>) -> bool {
    use base64::Engine as _;
    use std::time::{Duration, Instant};
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = false;
    while !seen && Instant::now() < deadline {
        cli.ok(&["send", name, "ping", "--submit", "--wait", "none"]);
        while let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            let value: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
            assert!(value["event"].is_string(), "{line}");
            if value["event"] == "output" || value["event"] == "extended-output" {
                assert_eq!(value["pane"], "%0");
                let data = base64::engine::general_purpose::STANDARD
                    .decode(value["data"].as_str().unwrap())
                    .unwrap();
                seen |= data.windows(4).any(|w| w == b"ping");
            }
        }
    }
    seen
}

#[test]
fn events_streams_the_terminals_notifications_as_json_lines() {
    let cli = Cli::new();
    cli.ok(&["spawn", "--name", "ev", "--", "sh", "-c", "exec cat"]);
    let (mut events, rx, reader) = spawn_events(&cli, "ev");
    let seen = typing_shows_in(&cli, "ev", &rx);
    assert!(seen, "no output event carried the typed text");
    cli.ok(&["kill", "ev"]);
    // The server is gone: `events` ends by itself.
    assert!(events.wait().unwrap().success());
    reader.join().unwrap();
    assert_eq!(servers_left(&cli.runtime()), 0);
}

#[test]
fn ctrl_c_ends_a_command_with_130_and_detaches_leaving_the_terminal_running() {
    use rustix::process::Signal;
    use std::time::{Duration, Instant};
    use tmux_engine::tmux::process;
    let cli = Cli::new();
    cli.ok(&["spawn", "--name", "ev", "--", "sh", "-c", "exec cat"]);
    let (events, rx, reader) = spawn_events(&cli, "ev");
    // Kills `events` if an assertion fails before it exits.
    struct Reap(u32);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = process::signal(self.0, Signal::KILL);
        }
    }
    let _reap = Reap(events.id());
    // Attached once its stream shows what we type.
    let attached = typing_shows_in(&cli, "ev", &rx);
    assert!(attached, "events never showed the pane's output");
    let socket = sockets(&cli.runtime())
        .pop()
        .expect("the terminal's socket");
    let clients = || {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .args(["list-clients", "-F", "#{client_pid}"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    // `events` (its own client, and its registry's for the terminal).
    assert!(clients() >= 1);

    process::signal(events.id(), Signal::INT).unwrap();
    let out = events.wait_with_output().unwrap();
    reader.join().unwrap();
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("error: INTERRUPTED"),
        "{out:?}"
    );
    // It detached before exiting (the server may note the last hangup a
    // moment later), and the terminal lives on.
    let deadline = Instant::now() + Duration::from_secs(10);
    while clients() != 0 {
        assert!(Instant::now() < deadline, "`events` left clients attached");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(cli.ok(&["probe", "ev"]).contains("running"));
    cli.ok(&["kill", "ev"]);
    assert_eq!(servers_left(&cli.runtime()), 0);
}

/// Issue 17: `record` writes asciicast v2 that parses line by line, and
/// replaying its output events gives the terminal's final screen.
#[test]
fn record_writes_asciicast_that_replays_to_the_final_screen() {
    use tmux_engine::screen::asciicast::Recording;
    let cli = Cli::new();
    cli.ok(&["spawn", "--name", "rec", "--size", "60x12"]);
    cli.ok(&["send", "rec", "--wait", "stdin"]);
    let file = cli.dir.path().join("rec.cast");
    let file_arg = file.to_str().unwrap().to_owned();
    let mut recorder = cli
        .command(&["record", "rec", &file_arg])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // Recording has begun once the screen it starts from is written.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::fs::read_to_string(&file).map_or(0, |text| text.lines().count()) < 2 {
        assert!(std::time::Instant::now() < deadline, "no recording started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for text in [
        "printf '\\033[1mbold\\033[0m %s\\n' one",
        "seq 1 30",
        "echo end",
    ] {
        cli.ok(&["send", "rec", text, "--submit"]);
    }
    let screen: serde_json::Value =
        serde_json::from_str(&cli.ok(&["--json", "screen", "rec"])).unwrap();
    cli.ok(&["kill", "rec"]);
    let status = recorder.wait().unwrap();
    assert!(status.success(), "{status}");
    let text = std::fs::read_to_string(&file).unwrap();
    for line in text.lines() {
        let value: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(value.is_object() || value.is_array(), "{line}");
    }
    let recording = Recording::parse(&text).unwrap();
    let trimmed = |rows: Vec<String>| {
        let mut rows: Vec<String> = rows.into_iter().map(|r| r.trim_end().to_owned()).collect();
        while rows.last().is_some_and(String::is_empty) {
            rows.pop();
        }
        rows
    };
    let replayed = trimmed(recording.final_screen().rows().map(str::to_owned).collect());
    let live = trimmed(
        screen["lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|line| line.as_str().unwrap().to_owned())
            .collect(),
    );
    assert_eq!(replayed, live);
    assert!(live.iter().any(|row| row.contains("end")), "{live:?}");
}
