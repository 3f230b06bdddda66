//! End-to-end throughput: `tmux-engine run -- cat <64 MiB file>` against a
//! raw reader of `tmux -C` (no engine: read stdout until a marker), in the
//! same run, alternating so machine noise hits both alike.
//!
//! `cargo bench --bench throughput` (env `BENCH_MB`, default 64; `BENCH_ROUNDS`,
//! default 3). Target: the engine streams at least 0.95 of the raw rate.

mod common;

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{env_or, make_payload};

/// Raw `tmux -C`: attach to a detached session, make its shell `cat` the
/// file, read stdout until the end marker. Seconds from the send-keys.
fn raw_control(dir: &Path, payload: &Path) -> f64 {
    let sock = dir.join("raw.sock");
    let tmux = |args: &[&str]| {
        let status = Command::new("tmux")
            .arg("-S")
            .arg(&sock)
            .args(["-f", "/dev/null"])
            .args(args)
            .status()
            .expect("tmux");
        assert!(status.success(), "tmux {args:?}");
    };
    tmux(&["new-session", "-d", "-s", "b", "-x", "80", "-y", "24", "sh"]);
    let mut child = Command::new("tmux")
        .arg("-S")
        .arg(&sock)
        .args(["-C", "attach", "-t", "b"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("tmux -C");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut buf = vec![0u8; 1 << 20];
    let mut tail: Vec<u8> = Vec::new();
    // The attach block closes before we write (tmux 3.3a reads stdin early).
    while !tail.windows(5).any(|w| w == b"%end ") {
        let n = stdout.read(&mut buf).expect("reading banner");
        assert!(n > 0, "tmux -C ended");
        tail.extend_from_slice(&buf[..n]);
    }
    let start = Instant::now();
    writeln!(
        stdin,
        "send-keys -t b 'stty -echo; cat {}; echo ENDMARK$((1+1))XYZ' Enter",
        payload.display()
    )
    .expect("send-keys");
    let mut tail: Vec<u8> = Vec::new();
    loop {
        let n = stdout.read(&mut buf).expect("reading output");
        assert!(n > 0, "tmux -C ended early");
        tail.extend_from_slice(&buf[..n]);
        if tail.windows(11).any(|w| w == b"ENDMARK2XYZ") {
            break;
        }
        let keep = tail.len().saturating_sub(16);
        tail.drain(..keep);
    }
    let secs = start.elapsed().as_secs_f64();
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    tmux(&["kill-server"]);
    secs
}

/// The engine: the whole `run` process, its output read and counted.
/// Returns (seconds to the last byte, seconds to exit).
fn engine_run(dir: &Path, payload: &Path, expected: usize) -> (f64, f64) {
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tmux-engine"))
        .env("TMUX_ENGINE_RUNTIME_DIR", dir)
        .args(["run", "--", "cat"])
        .arg(payload)
        .stdout(Stdio::piped())
        .spawn()
        .expect("tmux-engine run");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0;
    while got < expected {
        let n = stdout.read(&mut buf).expect("reading run output");
        assert!(n > 0, "run ended after {got} of {expected} bytes");
        got += n;
    }
    let last_byte = start.elapsed().as_secs_f64();
    let status = child.wait().expect("waiting for run");
    assert!(status.success(), "run failed: {status}");
    (last_byte, start.elapsed().as_secs_f64())
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let mb = env_or("BENCH_MB", 64);
    let rounds = env_or("BENCH_ROUNDS", 3);
    let dir = tempfile::Builder::new()
        .prefix("tmuxeng-bench")
        .tempdir_in("/tmp")
        .expect("temp dir");
    let payload = dir.path().join("payload.bin");
    let (size, lines) = make_payload(&payload, mb);
    // The pty turns each \n into \r\n.
    let expected = size + lines;
    let mb_s = |secs: f64| size as f64 / secs / 1e6;

    let mut raw = Vec::new();
    let mut engine = Vec::new();
    let mut engine_exit = Vec::new();
    for round in 0..rounds {
        let r = raw_control(dir.path(), &payload);
        let (e, x) = engine_run(dir.path(), &payload, expected);
        println!(
            "round {round}: raw tmux -C {:.1} MB/s, engine run {:.1} MB/s to last byte ({:.1} MB/s to exit)",
            mb_s(r),
            mb_s(e),
            mb_s(x)
        );
        raw.push(r);
        engine.push(e);
        engine_exit.push(x);
        std::thread::sleep(Duration::from_millis(200));
    }
    let best = |v: &[f64]| v.iter().cloned().fold(f64::INFINITY, f64::min);
    let (r, e, x) = (best(&raw), best(&engine), best(&engine_exit));
    println!(
        "best of {rounds}: {mb} MiB of pane output; raw tmux -C {:.1} MB/s; engine {:.1} MB/s to last byte, {:.1} MB/s to exit",
        mb_s(r),
        mb_s(e),
        mb_s(x)
    );
    println!(
        "ratio engine/raw: {:.3} to last byte, {:.3} to exit (target >= 0.95)",
        r / e,
        r / x
    );
}
