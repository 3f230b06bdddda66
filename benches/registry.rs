//! Registry benchmarks against real tmux, each beside its raw-tmux baseline
//! in the same run:
//!
//! 1. spawn-to-ready and kill latency per terminal vs `tmux new-session -d`
//!    and `tmux kill-server`;
//! 2. `send` of `echo` to its output seen vs a raw `tmux -C` reader;
//! 3. 200 live terminals: engine RSS per terminal, `list` and probe-all time;
//! 4. restart: 50 terminals spawned by a child process that is then
//!    SIGKILLed; the CLI binary (`list --json`, `read`) in a new process must
//!    adopt all 50 with names, owners and scrollback.
//!
//! Run: `cargo bench --bench registry` (`BENCH_TERMINALS=200`,
//! `BENCH_ROUNDS=20` to change sizes; `BENCH_ONLY=spawn,send,many,restart`
//! runs only the named scenarios).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tmux_engine::backend::{TmuxConfig, open_registry};
use tmux_engine::registry::{OwnerId, ReadRequest, Registry, SendRequest, SpawnSpec, WaitFor};
use tmux_engine::tmux::process;
use tmux_engine::tmux::send_keys_hex;
use tmux_engine::vocab::PaneId;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use common::{env_or, median, ms, raw_session_args, rss_kib};

/// A registry on `dir`'s state directory with the pinned `/bin/sh`,
/// through the library's own one-line opener.
async fn open(dir: &Path) -> Registry {
    let config = TmuxConfig::new(dir.join("rt")).shell("/bin/sh");
    open_registry(dir.join("state"), config).await.unwrap().0
}

async fn raw_tmux(args: &[&str]) {
    let status = tokio::process::Command::new("tmux")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .unwrap();
    assert!(status.success(), "tmux {args:?}");
}

/// The pid of the server on `socket`.
async fn raw_pid(socket: &str) -> u32 {
    let out = tokio::process::Command::new("tmux")
        .args(["-S", socket, "display-message", "-p", "#{pid}"])
        .output()
        .await
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

async fn spawn_and_kill(dir: &Path, rounds: usize) {
    let registry = open(dir).await;
    let owner = OwnerId::new("bench").unwrap();
    let (mut engine_spawn, mut engine_kill, mut raw_spawn, mut raw_kill, mut raw_gone) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let conf = dir.join("raw.conf");
    std::fs::write(&conf, "set -g remain-on-exit on\nset -g status off\n").unwrap();
    for round in 0..rounds {
        let start = Instant::now();
        let snapshot = registry
            .owner(&owner)
            .spawn(SpawnSpec::new())
            .await
            .unwrap();
        engine_spawn.push(start.elapsed());
        let start = Instant::now();
        registry
            .owner(&owner)
            .kill(snapshot.id.as_str())
            .await
            .unwrap();
        engine_kill.push(start.elapsed());

        let socket = dir.join(format!("raw{round}.sock"));
        let socket = socket.to_str().unwrap();
        let conf = conf.to_str().unwrap();
        let mut args = vec!["-S", socket];
        args.extend(raw_session_args(conf, &["/bin/sh"]));
        let start = Instant::now();
        raw_tmux(&args).await;
        raw_spawn.push(start.elapsed());
        let server_pid = raw_pid(socket).await;
        let start = Instant::now();
        raw_tmux(&["-S", socket, "kill-server"]).await;
        raw_kill.push(start.elapsed());
        // The client returns once the server has the command, not when it
        // has exited: also time until the server pid is gone, which is
        // what the engine's kill waits for.
        assert!(process::wait_dead(server_pid, Duration::from_secs(10)).await);
        raw_gone.push(start.elapsed());
    }
    registry.dispose().await.unwrap();
    let (es, rs, ek, rk, rg) = (
        median(engine_spawn),
        median(raw_spawn),
        median(engine_kill),
        median(raw_kill),
        median(raw_gone),
    );
    println!(
        "spawn-to-ready  engine {}  raw new-session -d {}  ratio {:.2}",
        ms(es),
        ms(rs),
        es.as_secs_f64() / rs.as_secs_f64()
    );
    println!(
        "kill            engine {}  raw kill-server returns {} (ratio {:.2})  raw server pid gone {} (ratio {:.2})",
        ms(ek),
        ms(rk),
        ek.as_secs_f64() / rk.as_secs_f64(),
        ms(rg),
        ek.as_secs_f64() / rg.as_secs_f64()
    );
}

async fn send_echo(dir: &Path, rounds: usize) {
    let registry = open(dir).await;
    let owner = OwnerId::new("bench").unwrap();
    registry
        .owner(&owner)
        .spawn(SpawnSpec::new().name("echo"))
        .await
        .unwrap();
    // Warm up: the shell is at its prompt before the clock starts.
    registry
        .owner(&owner)
        .send(
            "echo",
            SendRequest {
                wait: WaitFor::StdinRead,
                ..SendRequest::default()
            },
        )
        .await
        .unwrap()
        .result()
        .await
        .unwrap();
    let mut engine = Vec::new();
    for round in 0..rounds {
        // The typed text differs from what echo prints, so the tty's echo
        // of the command line never matches.
        let marker = format!("mark{round}x");
        let typed = format!("echo mark$(({round}+0))x");
        let start = Instant::now();
        let handle = registry
            .owner(&owner)
            .send(
                "echo",
                SendRequest {
                    text: typed.into(),
                    submit: true,
                    wait: WaitFor::None,
                    timeout: None,
                    history: true,
                    keys: Vec::new(),
                },
            )
            .await
            .unwrap();
        // Woken by the output itself (no polling): what a caller
        // following the send sees.
        loop {
            let output = handle.read_output();
            if output.text.contains(&marker) {
                break;
            }
            handle.output_beyond(output.bytes.len()).await;
        }
        engine.push(start.elapsed());
        handle.result().await.unwrap();
    }
    registry.dispose().await.unwrap();

    // Raw: a tmux -C client of our own, write send-keys, read %output.
    let socket = dir.join("rawecho.sock");
    let socket = socket.to_str().unwrap();
    raw_tmux(&[
        "-S",
        socket,
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "/bin/sh",
    ])
    .await;
    let (_child, mut stdin, mut lines) = common::raw_control_client(socket);
    // Let the shell print its prompt first.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut raw = Vec::new();
    for round in 0..rounds {
        let marker = format!("mark{round}x");
        let start = Instant::now();
        // The very command the engine writes: text and Enter hex-encoded
        // in one `send-keys -H`.
        let typed = format!("echo mark$(({round}+0))x\r");
        let mut line = String::new();
        for command in send_keys_hex(PaneId(0), typed.as_bytes(), 1024) {
            line.push_str(command.line());
            line.push('\n');
        }
        stdin.write_all(line.as_bytes()).await.unwrap();
        let needle = marker.clone();
        let mut seen = String::new();
        loop {
            let line = lines.next_line().await.unwrap().unwrap();
            if line.starts_with("%output") {
                seen.push_str(line.splitn(3, ' ').nth(2).unwrap_or(""));
                if seen.contains(&needle) {
                    break;
                }
            }
        }
        raw.push(start.elapsed());
    }
    drop(stdin);
    raw_tmux(&["-S", socket, "kill-server"]).await;
    let (e, r) = (median(engine), median(raw));
    println!(
        "send echo->seen engine {}  raw tmux -C {}  ratio {:.2}",
        ms(e),
        ms(r),
        e.as_secs_f64() / r.as_secs_f64()
    );
}

async fn many(dir: &Path, count: usize) {
    let registry = open(dir).await;
    let owner = OwnerId::new("bench").unwrap();
    let before = rss_kib(std::process::id());
    let start = Instant::now();
    for n in 0..count {
        registry
            .owner(&owner)
            .spawn(SpawnSpec::new().name(format!("t{n}")))
            .await
            .unwrap();
    }
    let spawned = start.elapsed();
    let after = rss_kib(std::process::id());
    let start = Instant::now();
    let list = registry.owner(&owner).list().await.unwrap();
    let listed = start.elapsed();
    assert_eq!(list.len(), count);
    let start = Instant::now();
    let probes = futures_util::future::join_all(
        list.iter()
            .map(|s| registry.owner(&owner).probe(s.id.as_str())),
    )
    .await;
    let probed = start.elapsed();
    assert!(
        probes
            .iter()
            .all(|p| p.as_ref().is_ok_and(|p| !p.observed.is_dead()))
    );
    println!(
        "{count} terminals  spawned in {:.1} s  engine RSS {:.1} KiB/terminal ({} -> {} KiB)  list {}  probe all {}",
        spawned.as_secs_f64(),
        (after.saturating_sub(before)) as f64 / count as f64,
        before,
        after,
        ms(listed),
        ms(probed)
    );
    let start = Instant::now();
    registry.dispose().await.unwrap();
    println!(
        "{count} terminals  dispose {:.1} s",
        start.elapsed().as_secs_f64()
    );
}

/// The child half of the restart benchmark: spawn `count` terminals, each
/// printing a line, then wait to be killed.
async fn restart_child(dir: PathBuf, count: usize) {
    let registry = open(&dir).await;
    for n in 0..count {
        let owner = OwnerId::new(format!("owner{}", n % 5)).unwrap();
        registry
            .owner(&owner)
            .spawn(SpawnSpec::new().name(format!("r{n}")).command([
                "/bin/sh",
                "-c",
                &format!("echo scroll-{n}; exec sleep 600"),
            ]))
            .await
            .unwrap();
    }
    println!("ready");
    std::future::pending::<()>().await;
}

async fn restart(dir: &Path, count: usize) {
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .env("BENCH_RESTART_CHILD", dir)
        .env("BENCH_RESTART_COUNT", count.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next_line().await.unwrap().as_deref(), Some("ready"));
    child.start_kill().unwrap(); // SIGKILL
    child.wait().await.unwrap();
    let cli = env!("CARGO_BIN_EXE_tmux-engine");
    let rt = dir.join("rt");
    let start = Instant::now();
    let mut adopted = 0;
    for o in 0..5 {
        let out = std::process::Command::new(cli)
            .args(["--json", "--owner", &format!("owner{o}"), "list"])
            .env("TMUX_ENGINE_STATE_DIR", dir.join("state"))
            .env("XDG_RUNTIME_DIR", "/nonexistent")
            .output()
            .unwrap();
        let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        for t in list.as_array().unwrap() {
            assert_eq!(t["status"]["kind"], "running");
            assert_eq!(t["owner"], format!("owner{o}"));
            adopted += 1;
        }
    }
    let listed = start.elapsed();
    // Scrollback survives: read through a registry in this process.
    let registry = open(dir).await;
    let mut scrollback = 0;
    for n in 0..count {
        let owner = OwnerId::new(format!("owner{}", n % 5)).unwrap();
        let page = registry
            .owner(&owner)
            .read(&format!("r{n}"), ReadRequest::default())
            .await
            .unwrap();
        if page.lines.iter().any(|l| *l == format!("scroll-{n}")) {
            scrollback += 1;
        }
    }
    println!(
        "restart after SIGKILL: {adopted}/{count} adopted by `list --json` (5 owners, {} total), scrollback intact in {scrollback}/{count}",
        ms(listed)
    );
    registry.dispose().await.unwrap();
    let _ = rt;
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    if let Some(dir) = std::env::var_os("BENCH_RESTART_CHILD") {
        let count = env_or("BENCH_RESTART_COUNT", 50);
        runtime.block_on(restart_child(PathBuf::from(dir), count));
        return;
    }
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return; // `cargo test --benches` smoke mode: nothing to do
    }
    let rounds = env_or("BENCH_ROUNDS", 20);
    let terminals = env_or("BENCH_TERMINALS", 200);
    let base = tempfile::Builder::new()
        .prefix("tebench")
        .tempdir_in("/tmp")
        .unwrap();
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let run = |name: &str| only.is_empty() || only.split(',').any(|n| n.trim() == name);
    runtime.block_on(async {
        if run("spawn") {
            spawn_and_kill(&base.path().join("a"), rounds).await;
        }
        if run("send") {
            send_echo(&base.path().join("b"), rounds).await;
        }
        if run("many") {
            many(&base.path().join("c"), terminals).await;
        }
        if run("restart") {
            restart(&base.path().join("d"), 50).await;
        }
    });
}
