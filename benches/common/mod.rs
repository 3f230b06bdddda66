//! Helpers the benchmarks share: summarising samples, formatting times,
//! sizes from the environment, and a process's resident memory.
//!
//! Each bench is its own crate (`harness = false`) and includes this file
//! with `mod common;`; nothing here measures anything by itself.

// Each bench uses only some of these; the rest would warn in its crate.
#![allow(dead_code)]

pub mod serve;

use std::str::FromStr;
use std::time::Duration;

/// The median of `samples` (the upper one of an even count): one slow
/// outlier, such as a first run that warms caches, does not move it.
///
/// # Panics
/// When `samples` is empty.
pub fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// `d` in milliseconds with microsecond digits: the fixture waits resolve
/// in well under a millisecond.
pub fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

/// The environment variable `name` parsed as a `T`, `default` when it is
/// unset or does not parse (the benches' size knobs, `BENCH_*`).
pub fn env_or<T: FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The resident set size of process `pid` in KiB (`VmRSS` of
/// `/proc/PID/status`), 0 when it cannot be read (the process is gone).
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// The raw-tmux baseline's arguments after `-S SOCKET`: config `conf`, a
/// detached 80x24 session running `program`.
pub fn raw_session_args<'a>(conf: &'a str, program: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["-f", conf, "new-session", "-d", "-x", "80", "-y", "24"];
    args.extend_from_slice(program);
    args
}

/// Writes about `mb` MiB of one repeated line to `path`; returns (bytes,
/// lines). The same line as `shared/bench/raw_tmux_baselines.py`: tabs, a
/// backslash, SGR sequences and UTF-8, so escaping costs are real.
pub fn make_payload(path: &std::path::Path, mb: usize) -> (usize, usize) {
    let line: &[u8] =
        b"The quick brown fox \t jumps \\ over \x1b[1mlazy\x1b[0m dogs 0123456789 \xc3\xa9\n";
    let n = mb * 1024 * 1024 / line.len();
    let mut f = std::fs::File::create(path).expect("payload file");
    for _ in 0..n {
        std::io::Write::write_all(&mut f, line).expect("writing payload");
    }
    (n * line.len(), n)
}

/// The lines of a raw control client's stdout.
pub type RawLines = tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>;

/// A raw `tmux -S SOCKET -C attach`, no engine in between: the baseline
/// reader the latency benches compare the engine against. Its stdin takes
/// commands, its stdout's lines are the control-mode stream; it is killed
/// when the child is dropped.
///
/// # Panics
/// When tmux cannot be spawned.
pub fn raw_control_client(
    socket: &str,
) -> (tokio::process::Child, tokio::process::ChildStdin, RawLines) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new("tmux")
        .args(["-S", socket, "-C", "attach"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawning tmux -C attach");
    let stdin = child.stdin.take().expect("stdin is piped");
    let lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout is piped")).lines();
    (child, stdin, lines)
}
