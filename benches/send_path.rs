//! The send path against real tmux, each figure beside a raw-tmux baseline
//! from the same run: an integrated bash, `wait: command` sends whose
//! answers are complete (output, exit code, the prompt back), against a
//! `tmux -C` client of our own that writes the same `send-keys -H` and
//! reads `%output` until the same text shows (the raw client knows nothing
//! of where a command ends, so it stops at the first sight of its output:
//! a lower bound).
//!
//! 1. one command (`echo`);
//! 2. three commands in one send (three lines);
//! 3. a reply to the shell's own `read -p`;
//! 4. a wait on a command id (`wait_command` of a command that ended, as an
//!    agent collects one its send gave up on), beside the raw client's
//!    `echo $?` round trip (what an agent does without it).
//!
//! Run: `cargo bench --bench send_path` (`BENCH_ROUNDS=20`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tmux_engine::backend::{TmuxConfig, open_registry};
use tmux_engine::registry::{
    CommandRef, OwnerId, Registry, SendAnswer, SendRequest, SpawnSpec, WaitFor,
};
use tmux_engine::tmux::send_keys_hex;
use tmux_engine::vocab::PaneId;
use tokio::io::AsyncWriteExt;

use common::{RawLines, env_or, median, ms};

/// The three scenarios: what is typed before the clock starts (if any),
/// what is timed, and the text whose sight ends the raw baseline.
fn scenarios(round: usize) -> [(&'static str, Option<String>, String, String); 3] {
    [
        (
            "one command",
            None,
            format!("echo one$(({round}+0))x"),
            format!("one{round}x"),
        ),
        (
            "three commands",
            None,
            format!("echo a\necho b\necho c$(({round}+0))x"),
            format!("c{round}x"),
        ),
        (
            "reply to read",
            Some("read -p 'Name? ' n; echo \"hi-$n\"".to_owned()),
            format!("bob{round}"),
            format!("hi-bob{round}"),
        ),
    ]
}

async fn send(registry: &Registry, owner: &OwnerId, text: &str) -> SendAnswer {
    let request = SendRequest {
        text: text.to_owned().into(),
        submit: true,
        wait: WaitFor::Command,
        timeout: Some(Duration::from_secs(20)),
        history: true,
        keys: Vec::new(),
    };
    registry
        .owner(owner)
        .send("bench", request)
        .await
        .unwrap()
        .result()
        .await
        .unwrap()
}

async fn engine(dir: &Path, rounds: usize) -> Vec<Duration> {
    let config = TmuxConfig::new(dir.join("rt")).shell("/bin/bash");
    let registry = open_registry(dir.join("state"), config).await.unwrap().0;
    let owner = OwnerId::new("bench").unwrap();
    registry
        .owner(&owner)
        // Its own history file: the bench's commands stay out of the
        // user's ~/.bash_history (a test reads a shell's history).
        .spawn(
            SpawnSpec::new()
                .name("bench")
                .env("HISTFILE", dir.join("bash_history").display().to_string()),
        )
        .await
        .unwrap();
    send(&registry, &owner, "true").await;
    let mut medians = Vec::new();
    for scenario in 0..3 {
        let mut samples = Vec::new();
        for round in 0..rounds {
            let (_, before, typed, seen) = scenarios(round)[scenario].clone();
            if let Some(before) = before {
                send(&registry, &owner, &before).await;
            }
            let start = Instant::now();
            let answer = send(&registry, &owner, &typed).await;
            samples.push(start.elapsed());
            let output = answer.output;
            assert!(output.contains(&seen), "{output:?}");
        }
        medians.push(median(samples));
    }
    let mut samples = Vec::new();
    for round in 0..rounds {
        let answer = send(&registry, &owner, &format!("echo w{round}")).await;
        let start = answer.commands[0].start_cursor.parse().unwrap();
        let begun = Instant::now();
        let ended = registry
            .owner(&owner)
            .wait_command("bench", CommandRef::Id(start), Duration::from_secs(20))
            .await
            .unwrap();
        samples.push(begun.elapsed());
        assert_eq!(ended.output, format!("w{round}\n"));
    }
    medians.push(median(samples));
    registry.dispose().await.unwrap();
    medians
}

/// Writes `text` and Enter as the engine does, then reads `%output` until
/// `needle` shows.
async fn raw_send(
    stdin: &mut tokio::process::ChildStdin,
    lines: &mut RawLines,
    text: &str,
    needle: &str,
) {
    let typed = format!("{text}\r");
    let mut line = String::new();
    for command in send_keys_hex(PaneId(0), typed.as_bytes(), 1024) {
        line.push_str(command.line());
        line.push('\n');
    }
    stdin.write_all(line.as_bytes()).await.unwrap();
    let mut seen = String::new();
    loop {
        let line = lines.next_line().await.unwrap().unwrap();
        if line.starts_with("%output") {
            seen.push_str(line.splitn(3, ' ').nth(2).unwrap_or(""));
            if seen.contains(needle) {
                return;
            }
        }
    }
}

async fn raw(dir: &Path, rounds: usize) -> Vec<Duration> {
    std::fs::create_dir_all(dir).unwrap();
    let socket = dir.join("raw.sock");
    let socket = socket.to_str().unwrap();
    let status = tokio::process::Command::new("tmux")
        .args(["-S", socket, "-f", "/dev/null", "new-session", "-d"])
        .args([
            "env",
            &format!("HISTFILE={}", dir.join("bash_history").display()),
        ])
        .args(["/bin/bash", "--norc", "-i"])
        .stdin(Stdio::null())
        .status()
        .await
        .unwrap();
    assert!(status.success());
    let (_child, mut stdin, mut lines) = common::raw_control_client(socket);
    raw_send(&mut stdin, &mut lines, "echo ready$((1+1))", "ready2").await;
    let mut medians = Vec::new();
    for scenario in 0..3 {
        let mut samples = Vec::new();
        for round in 0..rounds {
            let (_, before, typed, seen) = scenarios(round)[scenario].clone();
            if let Some(before) = before {
                raw_send(&mut stdin, &mut lines, &before, "Name? ").await;
            }
            let start = Instant::now();
            raw_send(&mut stdin, &mut lines, &typed, &seen).await;
            samples.push(start.elapsed());
        }
        medians.push(median(samples));
    }
    let mut samples = Vec::new();
    for round in 0..rounds {
        let start = Instant::now();
        let text = format!("echo $?x$(({round}+0))");
        raw_send(&mut stdin, &mut lines, &text, &format!("0x{round}")).await;
        samples.push(start.elapsed());
    }
    medians.push(median(samples));
    drop(stdin);
    let _ = tokio::process::Command::new("tmux")
        .args(["-S", socket, "kill-server"])
        .status()
        .await;
    medians
}

fn main() {
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return; // `cargo test --benches` smoke mode: nothing to do
    }
    let rounds = env_or("BENCH_ROUNDS", 20);
    let base = tempfile::Builder::new()
        .prefix("tebench")
        .tempdir_in("/tmp")
        .unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (engine, raw) = runtime.block_on(async {
        let engine = engine(&base.path().join("engine"), rounds).await;
        let raw = raw(&base.path().join("raw"), rounds).await;
        (engine, raw)
    });
    for (index, (engine, raw)) in engine.iter().zip(&raw).enumerate() {
        let name = scenarios(0)
            .get(index)
            .map_or("wait on an id", |scenario| scenario.0);
        println!(
            "send {name:<15} engine (whole answer) {}  raw tmux -C (output seen) {}  ratio {:.2}",
            ms(*engine),
            ms(*raw),
            engine.as_secs_f64() / raw.as_secs_f64()
        );
    }
}
