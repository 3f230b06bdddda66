//! `tmux-engine attach` as a user runs it: on a real pseudo-terminal, the
//! terminal's screen is shown, typed keys reach the program (not with
//! `--read-only`), and the tmux prefix's detach ends it with status 0,
//! leaving the terminal running.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rustix::pty::{OpenptFlags, grantpt, ioctl_tiocgptpeer, openpt, unlockpt};
use rustix::termios::{Winsize, tcsetwinsize};

use crate::cli::{Cli, servers_left};

/// How long anything the attached client shows may take.
const DEADLINE: Duration = Duration::from_secs(20);

/// Prints a marker, then answers each line it reads. The texts looked for
/// in the terminal's output have no doubled letters, which tmux could draw
/// with a repeat sequence (REP) instead of as they are.
const PROGRAM: &str = "echo ready-to-read; while read line; do echo \"got:$line\"; done";

/// tmux's default prefix (the engine's config keeps it), then `d`: detach.
const DETACH: &[u8] = b"\x02d";

/// `tmux-engine ARGS` with a fresh pseudo-terminal as its stdio, as on a
/// user's terminal. Killed on drop; the tmux client it started exits when
/// the [`Cli`]'s servers are killed.
struct Attached {
    child: Child,
    /// The terminal side: what is written here is typed.
    master: File,
    /// What the terminal displays, read by a thread (it ends once every
    /// copy of the other side is closed: reads then fail with EIO).
    output: mpsc::Receiver<Vec<u8>>,
    seen: Vec<u8>,
}

impl Attached {
    fn spawn(cli: &Cli, args: &[&str]) -> Attached {
        let flags = OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC;
        let master = openpt(flags).expect("opening a pseudo-terminal");
        grantpt(&master).expect("grantpt");
        unlockpt(&master).expect("unlockpt");
        let slave = File::from(ioctl_tiocgptpeer(&master, flags).expect("opening its slave"));
        let size = Winsize {
            ws_row: 24,
            ws_col: 80,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        tcsetwinsize(&slave, size).expect("setting the window size");
        let stdio = || Stdio::from(slave.try_clone().expect("dup of the slave"));
        let child = cli
            .command(args)
            .env("TERM", "xterm-256color")
            .stdin(stdio())
            .stdout(stdio())
            .stderr(stdio())
            .spawn()
            .expect("spawning tmux-engine");
        // Only the child's copies may keep the terminal open.
        drop(slave);
        let master = File::from(master);
        let mut reader = master.try_clone().expect("dup of the master");
        let (tx, output) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        Attached {
            child,
            master,
            output,
            seen: Vec::new(),
        }
    }

    /// Waits until the terminal has displayed `text`.
    fn expect_text(&mut self, text: &str) {
        let deadline = Instant::now() + DEADLINE;
        while !self.shows(text) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.output.recv_timeout(left) {
                Ok(bytes) => self.seen.extend_from_slice(&bytes),
                Err(e) => panic!(
                    "the terminal never showed {text:?} ({e}); it showed: {:?}",
                    String::from_utf8_lossy(&self.seen)
                ),
            }
        }
    }

    fn shows(&self, text: &str) -> bool {
        self.seen.windows(text.len()).any(|w| w == text.as_bytes())
    }

    /// Types `keys` on the terminal.
    fn type_keys(&mut self, keys: &[u8]) {
        self.master.write_all(keys).expect("typing");
        self.master.flush().expect("typing");
    }

    /// Waits for `tmux-engine` to exit.
    fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(status) = self.child.try_wait().expect("waiting for tmux-engine") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "attach did not exit; the terminal showed: {:?}",
                String::from_utf8_lossy(&self.seen)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Spawns `name` running [`PROGRAM`] and waits until it has printed its
/// marker, so it is reading before anything is typed.
///
/// Keys written at once reach tmux within a millisecond, which it takes for
/// a paste (`assume-paste-time`): it then forwards the prefix key like any
/// other and `C-b d` does not detach. A person types slower; turning the
/// guess off lets a test type text and detach in one write, so tmux has
/// handled the text by the time the client exits.
fn spawn_reader(cli: &Cli, name: &str) {
    cli.ok(&["spawn", "--name", name, "--", "sh", "-c", PROGRAM]);
    cli.ok(&["wait", name, "--text", "ready-to-read", "--timeout", "20"]);
    let status = Command::new("tmux")
        .arg("-S")
        .arg(only_socket(&cli.runtime()))
        .args(["set-option", "-g", "assume-paste-time", "0"])
        .status()
        .expect("running tmux");
    assert!(status.success(), "{status:?}");
}

/// The socket of the one server under `runtime`.
fn only_socket(runtime: &Path) -> PathBuf {
    fn find(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir)
            .expect("readable runtime dir")
            .flatten()
        {
            let path = entry.path();
            if path.is_dir() {
                find(&path, found);
            } else if entry.file_name() == "tmux.sock" {
                found.push(path);
            }
        }
    }
    let mut found = Vec::new();
    find(runtime, &mut found);
    assert_eq!(found.len(), 1, "{found:?}");
    found.remove(0)
}

#[test]
fn attach_shows_the_screen_takes_keys_and_detaches_with_0() {
    let cli = Cli::new();
    spawn_reader(&cli, "main");
    let mut attached = Attached::spawn(&cli, &["attach", "main"]);
    // The screen drawn on attach has what the program printed before.
    attached.expect_text("ready-to-read");
    attached.type_keys(b"typed-word\r");
    // The program read the line and answered, on the terminal and in tmux.
    attached.expect_text("got:typed-word");
    assert!(cli.ok(&["screen", "main"]).contains("got:typed-word"));

    attached.type_keys(DETACH);
    let status = attached.wait_exit();
    assert!(status.success(), "{status:?}");
    attached.expect_text("[detached");
    let probe = cli.ok(&["probe", "main"]);
    assert!(probe.contains("\tmain\trunning\t"), "{probe}");
    // Still reading its input after the client left.
    cli.ok(&["send", "main", "after-detach", "--submit", "--wait", "none"]);
    cli.ok(&[
        "wait",
        "main",
        "--text",
        "got:after-detach",
        "--timeout",
        "20",
    ]);
    drop(attached);
    cli.ok(&["kill", "main"]);
    assert_eq!(servers_left(&cli.runtime()), 0);
}

#[test]
fn read_only_attach_shows_output_but_keys_do_not_reach_the_program() {
    let cli = Cli::new();
    spawn_reader(&cli, "ro");
    let mut attached = Attached::spawn(&cli, &["attach", "ro", "--read-only"]);
    attached.expect_text("ready-to-read");
    // Live output is shown too.
    cli.ok(&["send", "ro", "sent-word", "--submit", "--wait", "none"]);
    attached.expect_text("got:sent-word");

    // The detach comes after the line in the same write: once attach has
    // exited, tmux has handled (and dropped) the line.
    attached.type_keys(&[&b"typed-word\r"[..], DETACH].concat());
    let status = attached.wait_exit();
    assert!(status.success(), "{status:?}");
    // All the terminal showed up to the detach, without the line's echo.
    attached.expect_text("[detached");
    assert!(!attached.shows("typed-word"));
    // The program still reads: what `send` types arrives, the typed line
    // never did (no echo, no answer).
    cli.ok(&["send", "ro", "after-detach", "--submit", "--wait", "none"]);
    cli.ok(&[
        "wait",
        "ro",
        "--text",
        "got:after-detach",
        "--timeout",
        "20",
    ]);
    let screen = cli.ok(&["screen", "ro"]);
    assert!(!screen.contains("typed-word"), "{screen}");
    drop(attached);
    cli.ok(&["kill", "ro"]);
    assert_eq!(servers_left(&cli.runtime()), 0);
}

#[test]
fn attach_to_an_unknown_name_fails_with_no_terminal_and_needs_no_tty() {
    let cli = Cli::new();
    for args in [
        &["attach", "nothing"][..],
        &["attach", "nothing", "--read-only"],
    ] {
        // stdin is null and stdout/stderr are pipes: no terminal anywhere.
        let output = cli.run(args);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.starts_with("error: NO_TERMINAL: "),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains("nothing"), "{stderr}");
        assert!(output.stdout.is_empty());
    }
}

/// Issue 10, item 10: `attach` holds the server's handshake lock around the
/// attach of `tmux attach` (before: it took none), and lets go once the
/// client is attached.
#[test]
fn attach_waits_for_the_handshake_lock_and_releases_it_once_attached() {
    use std::fs::TryLockError;
    let cli = Cli::new();
    spawn_reader(&cli, "locked");
    // The handshake lock is the server's directory itself.
    let lock_path = only_socket(&cli.runtime())
        .parent()
        .expect("the socket's directory")
        .to_owned();
    let lock = std::fs::File::open(&lock_path).expect("opening the handshake lock");
    lock.lock().expect("taking the handshake lock");

    let mut attached = Attached::spawn(&cli, &["attach", "locked"]);
    // While another engine client holds the lock, nothing attaches (a
    // bounded look: the CLI's connection and probe take far less).
    let window = Instant::now() + Duration::from_millis(700);
    while let Some(left) = window.checked_duration_since(Instant::now()) {
        if let Ok(bytes) = attached.output.recv_timeout(left) {
            attached.seen.extend_from_slice(&bytes);
        }
    }
    assert!(
        !attached.shows("ready-to-read"),
        "attached while the handshake lock was held"
    );
    lock.unlock().expect("releasing");
    attached.expect_text("ready-to-read");

    // Attached: the CLI has let go, though `tmux attach` still runs.
    let deadline = Instant::now() + DEADLINE;
    loop {
        match lock.try_lock() {
            Ok(()) => break,
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) => panic!("locking: {e}"),
        }
        assert!(Instant::now() < deadline, "attach kept the handshake lock");
        std::thread::sleep(Duration::from_millis(10));
    }
    lock.unlock().expect("releasing");
    assert!(attached.child.try_wait().expect("polling").is_none());

    attached.type_keys(DETACH);
    assert!(attached.wait_exit().success());
    cli.ok(&["kill", "locked"]);
    assert_eq!(servers_left(&cli.runtime()), 0);
}
