//! The exit handshake's two wrappers against a real tmux: the relay
//! executable's (where a server has a relay) and the `/bin/sh` script
//! (where none is known). Each reports the program's status as tmux sees
//! the pane die, and outlives a Ctrl-C aimed at the pane while its
//! program runs.

use std::path::PathBuf;
use std::time::Duration;

use tmux_engine::control::client::{ClientOptions, PaneEvent, PaneStream, SubscribeOptions};
use tmux_engine::control::wait_pane_exit;
use tmux_engine::terminal::{Parts, launch};
use tmux_engine::tmux::TmuxCommand;
use tmux_engine::vocab::ExitStatus;

use crate::support::{live, opts, sh_c, tmux};

/// The small relay binary, which is also the wrapper.
fn relay() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tmux-engine-relay"))
}

/// How long a pane may take to print or to die.
const WAIT: Duration = Duration::from_secs(15);

/// Starts `script` under the wrapper `relay` picks, and checks the pane's
/// first process is that wrapper.
async fn start(dir: &std::path::Path, relay: Option<PathBuf>, script: &str) -> Parts {
    let (parts, text) = start_command(dir, relay.clone(), sh_c(script, &[])).await;
    let relayed = relay.is_some();
    let want = relay.unwrap_or_else(|| "/bin/sh".into());
    let want = want.to_str().expect("UTF-8");
    assert!(text.contains(want), "{script}: {text}");
    assert_eq!(text.contains("__exit-wrapper"), relayed, "{script}: {text}");
    parts
}

/// Starts `command` under the wrapper `relay` picks; the server's parts
/// and what tmux started (`#{pane_start_command}`; the process may be gone
/// already).
async fn start_command(
    dir: &std::path::Path,
    relay: Option<PathBuf>,
    command: Vec<std::ffi::OsString>,
) -> (Parts, String) {
    let server = opts(dir)
        .raw_relay(relay)
        .exit_handshake(true)
        .command(command);
    let parts = launch(
        tmux(),
        server,
        ClientOptions::default(),
        SubscribeOptions::default(),
    )
    .await
    .expect("terminal starts");
    let started = TmuxCommand::new("display-message")
        .flag("-p")
        .target(parts.pane)
        .arg("#{pane_start_command}");
    let started = parts.client.command(&started).await.expect("display");
    let text = started.text();
    (parts, text)
}

/// Reads the stream until it has shown `text`.
async fn wait_for(stream: &mut PaneStream, text: &str) {
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains(text) {
        match tokio::time::timeout(WAIT, stream.recv()).await {
            Ok(Some(PaneEvent::Output(bytes))) => seen.extend_from_slice(&bytes),
            Ok(Some(PaneEvent::Resync(_))) => {}
            other => panic!("no {text:?} in {seen:?}: {other:?}"),
        }
    }
}

/// How the pane died; `what` names the case when it does not.
async fn exit_of(parts: &Parts, what: &str) -> ExitStatus {
    tokio::time::timeout(WAIT, wait_pane_exit(&parts.client, parts.pane))
        .await
        .unwrap_or_else(|_| panic!("{what}: the pane did not die in {WAIT:?}"))
        .expect("its status")
}

/// Every way a program ends is the pane's status: a code as that code, a
/// signal as that signal. `exit 130` is a code with the relay's wrapper;
/// the shell's has only `$?` and re-raises it as `SIGINT` (a known limit
/// of the fallback, which is why the relay's wraps wherever it can).
#[tokio::test]
async fn the_pane_dies_as_its_program_did() {
    live(async |dir| {
        let cases = [
            ("exit 3", ExitStatus::Code(3), true),
            ("exit 130", ExitStatus::Code(130), false),
            ("exit 255", ExitStatus::Code(255), true),
            ("kill -INT $$", ExitStatus::Signal(2), true),
            ("kill -TERM $$", ExitStatus::Signal(15), true),
            ("kill -USR1 $$", ExitStatus::Signal(10), true),
            ("kill -KILL $$", ExitStatus::Signal(9), true),
        ];
        for (script, want, sh_too) in cases {
            for relay in [Some(relay()), None] {
                if relay.is_none() && !sh_too {
                    continue;
                }
                let parts = start(dir.path(), relay.clone(), script).await;
                let what = format!("{script} under {relay:?}");
                let exit = exit_of(&parts, &what).await;
                assert_eq!(exit, want, "{what}");
                parts.server.kill().await.expect("kill");
            }
        }
    })
    .await;
}

/// A Ctrl-C reaches the pane's whole process group: the wrapper lives on
/// through it and reports what the program made of it, its own handling
/// (a code) or the default (the signal).
#[tokio::test]
async fn a_ctrl_c_is_the_programs_alone() {
    live(async |dir| {
        // "ready" comes from a child already started, so the interrupt
        // finds it whenever it lands (a child the shell forks only after
        // it would miss it, and the shell would wait on it for good).
        let cases = [
            (
                "trap 'exit 5' INT; sh -c 'echo ready; exec cat'",
                ExitStatus::Code(5),
            ),
            ("echo ready; exec cat", ExitStatus::Signal(2)),
        ];
        for (script, want) in cases {
            for relay in [Some(relay()), None] {
                let mut parts = start(dir.path(), relay.clone(), script).await;
                wait_for(&mut parts.output, "ready").await;
                let ctrl_c = TmuxCommand::new("send-keys").target(parts.pane).arg("C-c");
                parts.client.command(&ctrl_c).await.expect("send-keys");
                let what = format!("{script} under {relay:?}");
                let exit = exit_of(&parts, &what).await;
                assert_eq!(exit, want, "{what}");
                parts.server.kill().await.expect("kill");
            }
        }
    })
    .await;
}

/// A lone word runs exactly under the relay's wrapper, which is given it as
/// it is (no `/usr/bin/env` in front): a name the shell would parse (a
/// redirection, a `;`) and one no runner took before (`-` and `=`), each an
/// executable script whose output says it ran.
#[tokio::test]
async fn a_lone_word_runs_exactly_under_the_relays_wrapper() {
    live(async |dir| {
        for name in ["it's; a>b", "-x=y"] {
            let program = dir.path().join(name);
            crate::support::write_script(&program, "#!/bin/sh\necho \"ran $0\"\n");
            let (mut parts, started) =
                start_command(dir.path(), Some(relay()), vec![program.clone().into()]).await;
            assert!(!started.contains("/usr/bin/env"), "{started}");
            wait_for(&mut parts.output, &format!("ran {}", program.display())).await;
            let exit = exit_of(&parts, name).await;
            assert_eq!(exit, ExitStatus::Code(0), "{name}");
            assert!(
                !dir.path().join("b").exists(),
                "{name} was parsed by a shell"
            );
            parts.server.kill().await.expect("kill");
        }
    })
    .await;
}

/// A launcher process, killed if the test ends before it did.
struct Launcher(std::process::Child);

impl Drop for Launcher {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The relay's launcher (a pooled pane's first process), started as if in
/// a pane of a server in `dir` (`$TMUX`), waiting on `dir`'s launch fifo;
/// its stdin is a pipe the test holds.
fn start_launcher(dir: &std::path::Path) -> Launcher {
    let fifo = dir.join("launch.fifo");
    let _ = std::fs::remove_file(&fifo);
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("making the launch fifo");
    std::process::Command::new(relay())
        .args(["__exit-wrapper", "launch", "tmux-engine-exit"])
        .env("TMUX", format!("{}/tmux.sock,1,0", dir.display()))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .map(Launcher)
        .expect("starting the launcher")
}

/// Opens `dir`'s launch fifo to write once the launcher reads it.
fn open_fifo(dir: &std::path::Path) -> std::fs::File {
    open_fifo_named(dir, "launch.fifo")
}

/// Opens the fifo `name` in `dir` to write once somebody reads it.
fn open_fifo_named(dir: &std::path::Path, name: &str) -> std::fs::File {
    use std::os::unix::fs::OpenOptionsExt;
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        match std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
            .open(dir.join(name))
        {
            Ok(fifo) => return fifo,
            Err(error) if std::time::Instant::now() < deadline => {
                assert_eq!(
                    error.raw_os_error(),
                    Some(rustix::io::Errno::NXIO.raw_os_error())
                );
                std::thread::yield_now();
            }
            Err(error) => panic!("no launcher read the fifo: {error}"),
        }
    }
}

/// The relay's launcher reads its spec from the launch fifo up to its end
/// (a second NUL; the engine's end stays open) and lets the fifo go once
/// its program runs, so the engine learns that from the fifo (`POLLERR` on
/// its end) with no look in `/proc`; it still reads an older engine's
/// `launch.spec` after a lone newline. A launcher that held the fifo while
/// its program ran fails the first wait; one that read to the writer's
/// close never started its program.
#[test]
fn the_relays_launcher_takes_its_spec_through_the_fifo_and_lets_go_once_its_program_runs() {
    use std::io::Write;
    let dir = crate::support::test_dir();
    let mut launcher = start_launcher(dir.path());
    let mut fifo = open_fifo(dir.path());
    fifo.write_all(b"W/bin/sh\0W-c\0Wread -r _; exit 6\0\0")
        .expect("writing the spec");
    let mut polled = [rustix::event::PollFd::new(
        &fifo,
        rustix::event::PollFlags::empty(),
    )];
    let timeout = rustix::event::Timespec {
        tv_sec: WAIT.as_secs() as i64,
        tv_nsec: 0,
    };
    let ready = rustix::event::poll(&mut polled, Some(&timeout)).expect("polling the fifo");
    assert_eq!(ready, 1, "the launcher held the fifo while its program ran");
    assert!(polled[0].revents().contains(rustix::event::PollFlags::ERR));
    // What the engine's look then finds (`exit_handshake::wrapped`): a
    // child. Not its name: one run in six under load read it before the
    // kernel had renamed the child in its `exec`.
    assert!(
        tmux_engine::tmux::procfs::children(launcher.0.id()).is_some_and(|kids| !kids.is_empty()),
        "the program runs once the fifo is let go"
    );
    drop(launcher.0.stdin.take());
    let status = launcher.0.wait().expect("the launcher ends");
    assert_eq!(status.code(), Some(6));

    // An older engine: the spec in launch.spec, a lone newline, its close.
    let mut launcher = start_launcher(dir.path());
    std::fs::write(dir.path().join("launch.spec"), b"W/bin/sh\0W-c\0Wexit 5\0")
        .expect("writing launch.spec");
    let mut fifo = open_fifo(dir.path());
    fifo.write_all(b"\n").expect("writing the line");
    drop(fifo);
    drop(launcher.0.stdin.take());
    let status = launcher.0.wait().expect("the launcher ends");
    assert_eq!(status.code(), Some(5));
}

/// The relay's wrapper in `run` mode tells its program's start through the
/// handshake's fifo when the engine holds it open for reading (a new
/// terminal's connect: `exit_handshake::StartSignal`): the fifo's writer
/// comes and goes (`POLLHUP` on the engine's end) once the program has run
/// `exec`, so the engine needs no look in `/proc`. With nobody reading, the
/// wrapper runs its program as ever. A wrapper that told nothing fails the
/// first wait; one that let go before its program ran fails the look after.
#[test]
fn the_relays_wrapper_tells_its_programs_start_through_the_fifo() {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = crate::support::test_dir();
    let fifo_path = dir.path().join("exit.fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo_path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .expect("making the exit fifo");
    let wrapper = |script: &str| {
        std::process::Command::new(relay())
            .args(["__exit-wrapper", "run", "tmux-engine-exit", "/bin/sh", "-c"])
            .arg(script)
            .env("TMUX", format!("{}/tmux.sock,1,0", dir.path().display()))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .map(Launcher)
            .expect("starting the wrapper")
    };
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(&fifo_path)
        .expect("opening the fifo to read");
    let mut running = wrapper("read -r _; exit 6");
    let mut polled = [rustix::event::PollFd::new(
        &reader,
        rustix::event::PollFlags::IN,
    )];
    let timeout = rustix::event::Timespec {
        tv_sec: WAIT.as_secs() as i64,
        tv_nsec: 0,
    };
    let ready = rustix::event::poll(&mut polled, Some(&timeout)).expect("polling the fifo");
    assert_eq!(ready, 1, "the wrapper told nothing");
    assert!(polled[0].revents().contains(rustix::event::PollFlags::HUP));
    // Its child has run `exec` by then: no longer the wrapper's image.
    let child = tmux_engine::tmux::procfs::children(running.0.id())
        .and_then(|kids| kids.first().copied())
        .expect("the program runs once the fifo is let go");
    let exe = std::fs::read_link(format!("/proc/{child}/exe")).expect("the program's exe");
    assert_ne!(
        exe,
        relay(),
        "the fifo was let go before the program's exec"
    );
    drop(reader);
    drop(running.0.stdin.take());
    acknowledge(dir.path(), &mut running);
    assert_eq!(running.0.wait().expect("the wrapper ends").code(), Some(6));

    // Nobody reading: the open fails (ENXIO) and the program runs anyway.
    let mut alone = wrapper("exit 5");
    acknowledge(dir.path(), &mut alone);
    assert_eq!(alone.0.wait().expect("the wrapper ends").code(), Some(5));
}

/// The engine's acknowledgement to the wrapper in `dir`, written as the
/// engine writes it: once the wrapper's marker is on its stdout (it opens
/// the exit fifo before it prints it, so the line finds it reading).
/// Written sooner, the line could find only a passing reader (another
/// test's fork of this binary, not yet past its `exec`, holding a copy of
/// this test's reader) and go with it: the wrapper then waited for ever.
fn acknowledge(dir: &std::path::Path, wrapper: &mut Launcher) {
    use std::io::{Read, Write};
    let out = wrapper.0.stdout.as_mut().expect("the wrapper's stdout");
    let deadline = std::time::Instant::now() + WAIT;
    let mut seen = Vec::new();
    while !seen
        .windows(b"tmux-engine-exit".len())
        .any(|w| w == b"tmux-engine-exit")
    {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        assert!(!left.is_zero(), "no exit marker in {WAIT:?}: {seen:?}");
        let mut polled = [rustix::event::PollFd::new(
            &*out,
            rustix::event::PollFlags::IN,
        )];
        let timeout = rustix::event::Timespec {
            tv_sec: left.as_secs() as i64,
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        rustix::event::poll(&mut polled, Some(&timeout)).expect("polling the wrapper's stdout");
        if polled[0].revents().is_empty() {
            continue;
        }
        let mut chunk = [0u8; 256];
        let n = out.read(&mut chunk).expect("reading the wrapper's stdout");
        assert!(n > 0, "the wrapper ended without its marker: {seen:?}");
        seen.extend_from_slice(&chunk[..n]);
    }
    open_fifo_named(dir, "exit.fifo")
        .write_all(b"\n")
        .expect("acknowledging");
}
