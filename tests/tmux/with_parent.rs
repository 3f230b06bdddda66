//! `tmux-engine-relay __with-parent`: the program it runs is the program
//! given (words, environment, status), and is killed when its parent dies;
//! a parent already gone, or bad words, run nothing.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use tmux_engine::tmux::WITH_PARENT_ARG;
use tmux_engine::tmux::process::{ProcessId, is_alive, signal, wait_dead_blocking};

fn relay() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tmux-engine-relay"))
}

#[test]
fn runs_the_program_given_with_its_words_environment_and_status() {
    let out = Command::new(relay())
        .arg(WITH_PARENT_ARG)
        .arg(std::process::id().to_string())
        .args([
            "sh",
            "-c",
            r#"printf '%s|%s' "$1" "$WORD"; exit 3"#,
            "sh",
            "a b",
        ])
        .env("WORD", "set")
        .output()
        .expect("running the relay");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "a b|set");
    assert_eq!(out.status.code(), Some(3), "{out:?}");
}

#[test]
fn a_parent_that_is_not_the_parent_or_bad_words_run_nothing() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let marker = dir.path().join("ran");
    let touch = format!("touch '{}'", marker.display());
    // Pid 1 is not this test's: as if the engine had died before the
    // relay could ask for the signal.
    let cases: [(&[&str], i32); 3] = [
        (&["1", "sh", "-c", &touch], 1),
        (&["not-a-pid", "sh", "-c", &touch], 2),
        (&[], 2),
    ];
    for (words, code) in cases {
        let status = Command::new(relay())
            .arg(WITH_PARENT_ARG)
            .args(words)
            .stderr(Stdio::null())
            .status()
            .expect("running the relay");
        assert_eq!(status.code(), Some(code), "{words:?}");
        assert!(!marker.exists(), "{words:?} ran its program");
    }
}

#[test]
fn the_program_is_killed_when_its_parent_dies() {
    // sh is the parent: it starts the relay in the background, prints its
    // pid, and waits on its stdin until the test SIGKILLs it.
    let script = format!(
        r#"'{}' {WITH_PARENT_ARG} $$ sleep 600 & echo $!; read _"#,
        relay().display()
    );
    let mut parent = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting sh");
    let mut line = String::new();
    BufReader::new(parent.stdout.take().expect("piped"))
        .read_line(&mut line)
        .expect("reading the pid");
    let child: u32 = line.trim().parse().expect("a pid");
    let child = ProcessId::now(child);
    // Running `sleep` once exec'd (the relay asked first).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(format!("/proc/{}/comm", child.pid))
        .is_ok_and(|comm| comm.trim() != "sleep")
    {
        assert!(std::time::Instant::now() < deadline, "sleep never ran");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(is_alive(child));
    signal(parent.id(), rustix::process::Signal::KILL).expect("killing sh");
    let _ = parent.wait();
    assert!(
        wait_dead_blocking(child, Duration::from_secs(10)),
        "the program outlived its parent"
    );
}
