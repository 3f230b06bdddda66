//! Attach lifecycle benchmarks against real tmux, each figure beside a
//! baseline measured in the same run:
//!
//! 1. `leak`: `BENCH_ROUNDS` (20) rounds of spawn -> `BENCH_MB` (8) MiB to
//!    one control viewer -> kill -> viewer gone, through one `Registry` and
//!    one `Attacher` held for the whole run (as `serve` holds them). This
//!    process's RSS after each round, and its growth from round 1 (the goal:
//!    within 4 MiB). Baseline: the RSS before round 1. Run twice: with
//!    glibc's defaults, and (a child process) with
//!    `MALLOC_MMAP_THRESHOLD_=131072`, which stops glibc from raising its
//!    mmap threshold after the first freed multi-MiB buffer: then every
//!    buffer of a killed terminal goes back to the kernel, so what remains
//!    is what the engine still holds.
//! 2. `exit`: `BENCH_RUNS` (10) runs of a program printing `seq 1 1100000`
//!    (8.4 MiB on the tty) and exiting at once: the bytes each control
//!    viewer missed before its exit event, beside a raw `tmux -C` client of
//!    a raw tmux server running the same program (what tmux itself
//!    delivers to a control client: tmux <= 3.7 drops output it read but
//!    had not sent when the pane's program exits).
//!
//! Run: `nice -n 10 cargo bench --bench lifecycle`; `BENCH_ONLY=leak,exit`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::path::Path;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tmux_engine::attach::{AttachOptions, Attacher, ViewerEvent};
use tmux_engine::backend::{TmuxConfig, open_registry};
use tmux_engine::control::escape::unescape_output;
use tmux_engine::registry::{OwnerId, Registry, SpawnSpec};
use tokio::io::AsyncWriteExt;

use common::{env_or, make_payload, raw_control_client, rss_kib};

/// What the leak rounds' program prints after the file; typed as
/// `$((1+1))` so the tty's echo of the command never matches.
const MARK: &[u8] = b"END2MARK";

/// Lines of the exit runs' `seq`.
const SEQ: u32 = 1_100_000;

async fn open(dir: &Path) -> Registry {
    let config = TmuxConfig::new(dir.join("rt")).shell("/bin/sh");
    open_registry(dir.join("state"), config).await.unwrap().0
}

fn sh(script: &str) -> SpawnSpec {
    SpawnSpec::new().command(["/bin/sh", "-c", script])
}

/// `seq 1 SEQ` as the tty shows it.
fn seq_bytes() -> Vec<u8> {
    let mut out = Vec::new();
    for i in 1..=SEQ {
        out.extend_from_slice(format!("{i}\r\n").as_bytes());
    }
    out
}

async fn leak(dir: &Path, mb: usize, rounds: usize) {
    let payload = dir.join("leak.bin");
    make_payload(&payload, mb);
    let registry = open(dir).await;
    let owner = OwnerId::new("bench").unwrap();
    let attacher = Attacher::new(registry.clone());
    let me = std::process::id();
    let before = rss_kib(me);
    let mut first = None;
    let mut worst: i64 = 0;
    for round in 1..=rounds {
        let script = format!(
            "read go; cat {}; echo END$((1+1))MARK; read x",
            payload.display()
        );
        let snapshot = registry.owner(&owner).spawn(sh(&script)).await.unwrap();
        let id = snapshot.id.to_string();
        let mut viewer = attacher
            .attach(&owner, &id, AttachOptions::default())
            .await
            .unwrap();
        viewer.input(Bytes::from_static(b"\r")).await.unwrap();
        let mut tail = Vec::new();
        let mut got = 0usize;
        while !tail.windows(MARK.len()).any(|w| w == MARK) {
            match viewer.recv().await.expect("stream ended before the mark") {
                ViewerEvent::Output { bytes, .. } => {
                    got += bytes.len();
                    tail.extend_from_slice(&bytes);
                    let keep = tail.len().saturating_sub(64);
                    tail.drain(..keep);
                }
                ViewerEvent::Snapshot { repaint, .. } => tail.extend_from_slice(&repaint),
                _ => {}
            }
        }
        registry.owner(&owner).kill(&id).await.unwrap();
        while viewer.recv().await.is_some() {}
        drop(viewer);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while attacher.hub_count() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let rss = rss_kib(me);
        let base = *first.get_or_insert(rss);
        let growth = rss as i64 - base as i64;
        worst = worst.max(growth);
        println!(
            "leak round {round:>2}: {:.1} MiB to the viewer, hubs held {}, RSS {:.1} MiB ({:+.1} MiB from round 1)",
            got as f64 / 1048576.0,
            attacher.hub_count(),
            rss as f64 / 1024.0,
            growth as f64 / 1024.0
        );
    }
    println!(
        "leak {rounds} rounds of spawn -> {mb} MiB to a viewer -> kill: RSS before {:.1} MiB, \
         round 1 {:.1} MiB, largest growth from round 1 {:+.1} MiB (goal: within 4 MiB)",
        before as f64 / 1024.0,
        first.unwrap_or(0) as f64 / 1024.0,
        worst as f64 / 1024.0
    );
    attacher.shutdown().await;
    registry.dispose().await.unwrap();
}

/// One engine run: bytes the viewer got after its last snapshot, whether
/// they are a prefix of `want`, and the snapshots it was sent.
async fn engine_exit(
    registry: &Registry,
    attacher: &Attacher,
    want: &[u8],
) -> (usize, bool, usize) {
    let owner = OwnerId::new("bench").unwrap();
    let script = format!("stty -echo; read go; seq 1 {SEQ}; exit 0");
    let id = registry
        .owner(&owner)
        .spawn(sh(&script))
        .await
        .unwrap()
        .id
        .to_string();
    let mut viewer = attacher
        .attach(&owner, &id, AttachOptions::default())
        .await
        .unwrap();
    viewer.input(Bytes::from_static(b"\r")).await.unwrap();
    let mut got = Vec::with_capacity(want.len());
    let mut snapshots = 0;
    let mut exited = false;
    while let Some(event) = viewer.recv().await {
        match event {
            ViewerEvent::Output { bytes, .. } => got.extend_from_slice(&bytes),
            ViewerEvent::Snapshot { .. } => {
                snapshots += 1;
                got.clear();
            }
            ViewerEvent::Exit(_) => exited = true,
            ViewerEvent::Resize(_) => {}
        }
    }
    assert!(exited, "no exit event");
    registry.owner(&owner).kill(&id).await.unwrap();
    let got = without_echo(&got);
    (got.len(), want.starts_with(got), snapshots)
}

/// `got` without the tty's echo of the Enter that started the program,
/// when it came before `stty -echo` ran.
fn without_echo(got: &[u8]) -> &[u8] {
    got.strip_prefix(b"\r\n").unwrap_or(got)
}

/// One raw run: a tmux server of its own (remain-on-exit and the engine's
/// drain pipe, as the engine sets them), read by a raw `tmux -C` client;
/// the pane's bytes it got, and whether they are a prefix of `want`.
async fn raw_exit(dir: &Path, run: usize, want: &[u8]) -> (usize, bool) {
    let socket = dir.join(format!("raw{run}.sock"));
    let socket = socket.to_str().unwrap();
    let conf = dir.join("raw.conf");
    std::fs::write(&conf, "set -g remain-on-exit on\nset -g status off\n").unwrap();
    let program = format!("stty -echo; read go; seq 1 {SEQ}; exit 0");
    let started = std::process::Command::new("tmux")
        .args(["-S", socket])
        .args(common::raw_session_args(
            conf.to_str().unwrap(),
            &["/bin/sh", "-c", &program],
        ))
        .args([";", "pipe-pane", "-o", "exec cat >/dev/null"])
        .status()
        .unwrap();
    assert!(started.success());
    let (_child, mut stdin, mut lines) = raw_control_client(socket);
    stdin.write_all(b"send-keys Enter\n").await.unwrap();
    let mut got = BytesMut::with_capacity(want.len());
    // The stream has no end of its own: quiet for 3 s after the program is
    // dead means nothing more comes.
    while let Ok(Ok(Some(line))) =
        tokio::time::timeout(Duration::from_secs(3), lines.next_line()).await
    {
        if let Some(rest) = line.strip_prefix("%output %") {
            let data = rest.split_once(' ').map_or("", |(_, data)| data);
            unescape_output(data.as_bytes(), &mut got).unwrap();
        }
    }
    let _ = std::process::Command::new("tmux")
        .args(["-S", socket, "kill-server"])
        .status();
    let got = without_echo(&got);
    (got.len(), want.starts_with(got))
}

async fn exit_tail(dir: &Path, runs: usize) {
    let want = seq_bytes();
    let registry = open(dir).await;
    let attacher = Attacher::new(registry.clone());
    let (mut engine_lost, mut raw_lost, mut engine_short, mut raw_short) = (0, 0, 0, 0);
    for run in 1..=runs {
        let (got, prefix, snapshots) = engine_exit(&registry, &attacher, &want).await;
        let (raw, raw_prefix) = raw_exit(dir, run, &want).await;
        let lost = want.len() - got.min(want.len());
        let raw_missing = want.len() - raw.min(want.len());
        engine_lost += lost;
        raw_lost += raw_missing;
        engine_short += usize::from(lost > 0);
        raw_short += usize::from(raw_missing > 0);
        println!(
            "exit run {run:>2}: viewer missed {lost:>5} B (exact prefix: {prefix}, snapshots {snapshots}); \
             raw tmux -C missed {raw_missing:>5} B (exact prefix: {raw_prefix})"
        );
    }
    println!(
        "exit {runs} runs of {} B then exit: the viewer missed bytes in {engine_short} runs ({engine_lost} B in all); \
         raw tmux -C in {raw_short} runs ({raw_lost} B in all)",
        want.len()
    );
    attacher.shutdown().await;
    registry.dispose().await.unwrap();
}

fn main() {
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return; // `cargo test --benches` smoke mode: nothing to do
    }
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let run = |name: &str| only.is_empty() || only.split(',').any(|n| n.trim() == name);
    let dir = tempfile::Builder::new()
        .prefix("tebench")
        .tempdir_in("/tmp")
        .unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        if run("leak") {
            leak(
                dir.path(),
                env_or("BENCH_MB", 8),
                env_or("BENCH_ROUNDS", 20),
            )
            .await;
            if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
                println!("leak again with MALLOC_MMAP_THRESHOLD_=131072 (a child process):");
                let status = std::process::Command::new(std::env::current_exe().unwrap())
                    .env("MALLOC_MMAP_THRESHOLD_", "131072")
                    .env("BENCH_ONLY", "leak")
                    .status()
                    .unwrap();
                assert!(status.success());
            }
        }
        if run("exit") {
            exit_tail(dir.path(), env_or("BENCH_RUNS", 10)).await;
        }
    });
}
