//! Issue 10, item 6: a pid the engine recorded may name another process
//! by the time it acts on it. A record's pane pid whose start time does not
//! match the process now holding that pid is never signalled, by `signal`,
//! `kill` or `reap`, whether the server still runs or is gone.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use rustix::process::Signal;
use tmux_engine::tmux::process::{self, ProcessId};

use crate::cli::{Cli, servers_left};

/// A process unrelated to any terminal, killed when dropped.
struct Stranger(Child);

impl Stranger {
    /// `sleep` as the leader of its own session: the shape of a pane
    /// process, so a session kill aimed at its pid would take it.
    fn start() -> Stranger {
        Stranger(
            Command::new("setsid")
                .args(["sleep", "1000"])
                .stdin(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    fn alive(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none() && process::is_alive(self.pid())
    }
}

impl Drop for Stranger {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The record file of terminal `name`.
fn record_path(cli: &Cli, name: &str) -> PathBuf {
    let shown: serde_json::Value =
        serde_json::from_str(&cli.ok(&["--json", "show", name])).unwrap();
    cli.state()
        .join("terminals")
        .join(format!("{}.json", shown["id"].as_str().unwrap()))
}

/// Rewrites the record's pane process to `pid` with a start time that is
/// not its own: what the record says after that pid was reused.
fn record_pane(cli: &Cli, name: &str, pid: u32) -> serde_json::Value {
    let path = record_path(cli, name);
    let mut record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let start = ProcessId::now(pid).start_time.unwrap();
    record["locator"]["pane_pid"] = pid.into();
    record["locator"]["pane_start"] = (start + 1).into();
    std::fs::write(&path, serde_json::to_vec(&record).unwrap()).unwrap();
    record
}

fn error_of(cli: &Cli, args: &[&str]) -> String {
    let output = cli.run(args);
    assert!(!output.status.success(), "{args:?} succeeded");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The server alive: tmux reports the recorded pid as the pane's, but the
/// recorded start time says the process is not the one the engine
/// learnt. Before, adoption re-read the start time of whatever held the
/// pid and trusted it, so `signal` hit it.
#[test]
fn a_recorded_pane_with_another_start_time_is_never_signalled() {
    let cli = Cli::new();
    let shown: serde_json::Value = serde_json::from_str(
        &cli.ok(&["--json", "spawn", "--name", "held", "--", "sleep", "1000"]),
    )
    .unwrap();
    // The pane's own process (the exit handshake's wrapper), as recorded:
    // `pid` in the answer is the program's.
    let recorded: serde_json::Value =
        serde_json::from_slice(&std::fs::read(record_path(&cli, "held")).unwrap()).unwrap();
    let pane = u32::try_from(recorded["locator"]["pane_pid"].as_u64().unwrap()).unwrap();
    assert!(process::is_alive(
        u32::try_from(shown["pid"].as_u64().unwrap()).unwrap()
    ));
    record_pane(&cli, "held", pane);
    let refused = error_of(&cli, &["signal", "held", "KILL"]);
    assert!(refused.starts_with("error: TERMINAL_DEAD: "), "{refused}");
    assert!(process::is_alive(pane), "the pane process was signalled");
    cli.ok(&["kill", "held"]);
    assert_eq!(servers_left(&cli.runtime()), 0);
}

/// The server gone: the engine acts on the record alone. A stranger that
/// holds the recorded pid survives `signal`, `reap` and `kill`.
#[test]
fn a_stranger_holding_a_recorded_pid_survives_signal_reap_and_kill() {
    let cli = Cli::new();
    let mut stranger = Stranger::start();
    // Its own session by now (setsid ran before exec'ing sleep).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::read(format!("/proc/{}/comm", stranger.pid()))
        .map_or(true, |comm| !comm.starts_with(b"sleep"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "setsid never ran sleep"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    cli.ok(&["spawn", "--name", "lost", "--", "sleep", "1000"]);
    let record = record_pane(&cli, "lost", stranger.pid());
    let server = u32::try_from(record["locator"]["server_pid"].as_u64().unwrap()).unwrap();
    process::signal(server, Signal::KILL).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while process::is_alive(server) {
        assert!(std::time::Instant::now() < deadline, "the server survived");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let refused = error_of(&cli, &["signal", "lost", "TERM"]);
    assert!(refused.starts_with("error: "), "{refused}");
    assert!(stranger.alive(), "signal hit the stranger");
    cli.ok(&["reap", "--grace", "0"]);
    assert!(stranger.alive(), "reap hit the stranger");
    cli.ok(&["kill", "lost"]);
    assert!(stranger.alive(), "kill hit the stranger");
    assert_eq!(cli.ok(&["list"]), "");
}
