//! `tmux-engine run` and `decode` as a user runs them: the built binary,
//! real tmux, its own runtime directory per test.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::test_dir;

fn engine(runtime: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tmux-engine"));
    cmd.env("TMUX_ENGINE_RUNTIME_DIR", runtime)
        .stdin(Stdio::null());
    cmd
}

fn run(runtime: &Path, args: &[&str]) -> Output {
    std::fs::create_dir_all(runtime).expect("runtime dir");
    engine(runtime)
        .arg("run")
        .args(args)
        .output()
        .expect("running tmux-engine")
}

/// Nothing of any server is left: every server directory was removed.
fn assert_nothing_left(runtime: &Path) {
    let left: Vec<_> = std::fs::read_dir(runtime)
        .expect("runtime dir")
        .map(|e| e.expect("entry").path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn run_passes_exit_codes_and_signals_on() {
    let dir = test_dir();
    let rt = dir.path().join("rt");
    let out = run(&rt, &["--", "sh", "-c", "printf 'hello\\n'; exit 3"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    // The pty turns \n into \r\n; a program that exits at once still gets
    // its last bytes out (tmux would drop them without the exit handshake).
    assert_eq!(out.stdout, b"hello\r\n");

    let out = run(&rt, &["--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(out.status.code(), Some(128 + 15), "{out:?}");

    let out = run(&rt, &["--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stdout.is_empty());
    assert_nothing_left(&rt);
}

#[test]
fn run_streams_every_byte_of_a_large_output() {
    let dir = test_dir();
    let rt = dir.path().join("rt");
    let file = dir.path().join("payload");
    // Every byte value, many times over, plus text: 3 MiB.
    let mut payload: Vec<u8> = (0..=255u8).cycle().take(1 << 20).collect();
    payload.extend(b"line of text \xc3\xa9\n".repeat(100_000));
    std::fs::write(&file, &payload).expect("payload");
    // -opost: the pty passes bytes through untranslated.
    let script = format!("stty -opost; cat {}", file.display());
    let out = run(&rt, &["--size", "120x40", "--", "sh", "-c", &script]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{:?}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout.len(), payload.len());
    assert!(out.stdout == payload, "output differs from the file");
    assert_nothing_left(&rt);
}

#[test]
fn run_passes_arguments_without_a_shell() {
    let dir = test_dir();
    let rt = dir.path().join("rt");
    let out = run(&rt, &["--", "printf", "%s|", "a b", "$(x);", "'q'"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(out.stdout, b"a b|$(x);|'q'|");
}

#[test]
fn run_rejects_bad_usage_and_reports_engine_errors() {
    let dir = test_dir();
    let rt = dir.path().join("rt");
    let out = run(&rt, &["--size", "0x10", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "clap usage error: {out:?}");
    let out = run(&rt, &[]);
    assert_eq!(out.status.code(), Some(2), "a command is required: {out:?}");

    let out = engine(&rt)
        .env("TMUX_ENGINE_TMUX", dir.path().join("no-such-tmux"))
        .args(["run", "--", "true"])
        .output()
        .expect("running tmux-engine");
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("error: TMUX_MISSING: "), "{stderr}");
}

#[test]
fn ctrl_c_stops_run_and_removes_the_server() {
    let (status, left) = signal_run(rustix::process::Signal::INT);
    assert_eq!(status, Some(130));
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn decode_prints_json_lines_for_a_transcript() {
    let dir = test_dir();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/control/03-command-replies.client-1.out");
    let out = engine(dir.path())
        .arg("decode")
        .stdin(std::fs::File::open(fixture).expect("fixture"))
        .output()
        .expect("running tmux-engine decode");
    assert!(out.status.success(), "{out:?}");
    let lines: Vec<serde_json::Value> = out
        .stdout
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(lines.len(), 5);
    assert!(
        lines
            .iter()
            .all(|l| l["event"] == "reply" && l["flags"] == 1)
    );
    assert_eq!(lines[1]["lines"][0], "version=3.3a client=client-19917");
}

#[test]
fn a_closed_stdout_ends_run_quietly_and_cleans_up() {
    let dir = test_dir();
    let rt = dir.path().join("rt");
    std::fs::create_dir_all(&rt).expect("runtime dir");
    let mut child = engine(&rt)
        .args(["run", "--", "seq", "1", "10000000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning tmux-engine");
    // Read a little, then hang up, as `| head -1` does.
    let mut stdout = child.stdout.take().expect("piped");
    let mut first = [0u8; 16];
    let n = std::io::Read::read(&mut stdout, &mut first).expect("reading");
    assert!(n > 0);
    drop(stdout);
    let out = child.wait_with_output().expect("waiting");
    assert_eq!(out.status.code(), Some(141), "{out:?}");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_nothing_left(&rt);
}

/// Processes whose command line contains `token` (the engine's, tmux's
/// server and client, the wrapper shell, the program), found in `/proc`.
fn processes_with(token: &str) -> Vec<u32> {
    crate::cli::processes_where(|cmdline| memchr::memmem::find(cmdline, token.as_bytes()).is_some())
}

/// Each process's command line and open pipes, for a failure message.
fn describe(pids: &[u32]) -> String {
    let mut text = String::new();
    for pid in pids {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let fds: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|d| {
                d.flatten()
                    .filter_map(|e| {
                        let target = std::fs::read_link(e.path()).ok()?;
                        Some(format!(
                            "{}->{}",
                            e.file_name().to_string_lossy(),
                            target.display()
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        text.push_str(&format!(
            "\n  {pid} {:.100} {fds:?}",
            String::from_utf8_lossy(&cmdline).replace('\0', " ")
        ));
    }
    text
}

/// SIGKILLs every process of a run's token when dropped, so a failing test
/// leaves nothing behind.
struct KillTagged(String);

impl Drop for KillTagged {
    fn drop(&mut self) {
        for pid in processes_with(&self.0) {
            if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

/// Starts `run` on a program tagged with a unique sleep length, waits for
/// its output, signals the engine and returns its exit status once every
/// tagged process is gone, with what is left in its runtime directory.
fn signal_run(signal: rustix::process::Signal) -> (Option<i32>, Vec<std::path::PathBuf>) {
    let dir = test_dir();
    let rt = dir.path().join("rt");
    std::fs::create_dir_all(&rt).expect("runtime dir");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .subsec_nanos();
    let token = format!("9999.{nanos:09}");
    let _guard = KillTagged(token.clone());
    let script = format!("echo started; sleep {token}");
    let mut child = engine(&rt)
        .args(["run", "--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawning tmux-engine");
    let mut stdout = child.stdout.take().expect("piped");
    let mut seen = Vec::new();
    let mut buf = [0u8; 64];
    while !seen.windows(7).any(|w| w == b"started") {
        let n = std::io::Read::read(&mut stdout, &mut buf).expect("reading run's output");
        assert!(n > 0, "run ended early");
        seen.extend_from_slice(&buf[..n]);
    }
    let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("pid");
    rustix::process::kill_process(pid, signal).expect("signal");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting") {
            break status;
        }
        assert!(Instant::now() < deadline, "run did not stop on {signal:?}");
        std::thread::sleep(Duration::from_millis(10));
    };
    loop {
        let left = processes_with(&token);
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "left running after {signal:?}: {}",
            describe(&left)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let left = std::fs::read_dir(&rt)
        .expect("runtime dir")
        .map(|e| e.expect("entry").path())
        .collect();
    (status.code(), left)
}

#[test]
fn sighup_ends_run_like_sigterm() {
    // Before: only INT and TERM were handled; HUP killed the engine and left
    // tmux, the wrapper shell and the program running forever.
    let (status, left) = signal_run(rustix::process::Signal::HUP);
    assert_eq!(status, Some(128 + 1));
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_sigkilled_run_takes_its_server_along() {
    // Before: `exit-unattached off` kept the server, the wrapper (waiting in
    // `read`) and the program alive after the engine died.
    // Its directory stays (no one is left to remove it); `reap` does.
    assert_eq!(signal_run(rustix::process::Signal::KILL).0, None);
}
