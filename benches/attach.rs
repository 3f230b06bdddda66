//! Attach benchmarks against real tmux, each figure beside a baseline
//! measured in the same run:
//!
//! 1. `fanout`: 1, 10, 100 control viewers of one terminal that `cat`s a
//!    64 MiB file: per-viewer delivered rate against `tmux-engine run --
//!    cat` of the same file (run right before each case), the engine's CPU
//!    seconds per delivered GiB against `run`'s, and the same with one
//!    stalled viewer added (the others' rate against the unstalled case);
//! 2. `memory`: 100 viewers of a `yes` flood, one never reading: this
//!    process's RSS every second, its peak and its growth over the second
//!    half (the baseline is the RSS before the viewers attached);
//! 3. `echo`: keystroke to echo through a control viewer against a raw
//!    `tmux -C` reader writing the same `send-keys -H` (as in
//!    `benches/registry.rs`);
//! 4. `pty`: the PTY transport against one control viewer on the same file.
//!
//! Run: `cargo bench --bench attach`. Knobs: `BENCH_MB` (64),
//! `BENCH_VIEWERS` ("1,10,100"), `BENCH_SECS` (30, memory),
//! `BENCH_FLOOD_VIEWERS` (100), `BENCH_ROUNDS` (100, echo),
//! `BENCH_FAN_ROUNDS` (2), `BENCH_PTY_ROUNDS` (3),
//! `BENCH_ONLY=fanout,memory,echo,pty`. A quick run: `BENCH_MB=8
//! BENCH_VIEWERS=1,10 BENCH_SECS=5 BENCH_ROUNDS=20`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tmux_engine::attach::{AttachOptions, Attacher, Transport, Viewer, ViewerEvent};
use tmux_engine::backend::{TmuxConfig, open_registry};
use tmux_engine::registry::{OwnerId, Registry, SpawnSpec};
use tmux_engine::tmux::procfs;
use tmux_engine::tmux::send_keys_hex;
use tmux_engine::vocab::PaneId;
use tokio::io::AsyncWriteExt;

use common::{env_or, make_payload, median, ms, rss_kib};

/// What the program prints after the file; typed as `$((1+1))` so the
/// tty's echo of the command never matches.
const MARK: &[u8] = b"END2MARK";

/// CPU seconds process `pid` used so far (user + kernel); a zombie still
/// reports its totals.
fn cpu_secs(pid: u32) -> f64 {
    procfs::stat(pid).map_or(0.0, |s| (s.utime + s.stime) as f64 / 100.0)
}

/// A registry on `dir`'s state directory with the pinned `/bin/sh`,
/// through the library's own one-line opener.
async fn open(dir: &Path) -> Registry {
    let config = TmuxConfig::new(dir.join("rt")).shell("/bin/sh");
    open_registry(dir.join("state"), config).await.unwrap().0
}

/// The baseline: `tmux-engine run -- cat FILE`, its output read and
/// counted. Seconds to the last byte and the process's CPU seconds.
fn engine_run(dir: &Path, payload: &Path, expected: usize) -> (f64, f64) {
    let start = Instant::now();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tmux-engine"))
        .env("TMUX_ENGINE_RUNTIME_DIR", dir)
        .args(["run", "--", "cat"])
        .arg(payload)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0;
    while got < expected {
        let n = stdout.read(&mut buf).unwrap();
        assert!(n > 0, "run ended after {got} of {expected} bytes");
        got += n;
    }
    let secs = start.elapsed().as_secs_f64();
    // Its stdout closes as it exits; the zombie keeps its CPU totals.
    while stdout.read(&mut buf).unwrap_or(0) > 0 {}
    std::thread::sleep(Duration::from_millis(50));
    let cpu = cpu_secs(child.id());
    assert!(child.wait().unwrap().success());
    (secs, cpu)
}

/// What one viewer saw of a `cat`: bytes delivered, seconds from the start
/// to the end mark, snapshots received.
#[derive(Clone, Copy, Debug)]
struct Seen {
    bytes: u64,
    secs: f64,
    snapshots: u32,
}

/// Reads `viewer` until the end mark; counts output bytes.
async fn drain(mut viewer: Viewer, start: tokio::sync::watch::Receiver<Option<Instant>>) -> Seen {
    let mut seen = Seen {
        bytes: 0,
        secs: 0.0,
        snapshots: 0,
    };
    let mut tail: Vec<u8> = Vec::new();
    while let Some(event) = viewer.recv().await {
        let chunk = match event {
            ViewerEvent::Output { bytes, .. } => {
                seen.bytes += bytes.len() as u64;
                bytes
            }
            ViewerEvent::Snapshot { repaint, .. } => {
                seen.snapshots += 1;
                repaint
            }
            _ => continue,
        };
        tail.extend_from_slice(&chunk);
        if tail.windows(MARK.len()).any(|w| w == MARK) {
            break;
        }
        tail.drain(..tail.len().saturating_sub(MARK.len()));
    }
    let start = start.borrow().expect("started");
    seen.secs = start.elapsed().as_secs_f64();
    // Kept until here so the stream is not cut while others still read.
    drop(viewer);
    seen
}

/// A terminal that waits for a line, `cat`s `payload`, prints the mark.
async fn spawn_cat(registry: &Registry, owner: &OwnerId, name: &str, payload: &Path) {
    let script = format!(
        "stty -echo; read go; cat '{}'; echo END$((1+1))MARK; read x",
        payload.display()
    );
    registry
        .owner(owner)
        .spawn(
            SpawnSpec::new()
                .name(name)
                .command(["/bin/sh", "-c", &script]),
        )
        .await
        .unwrap();
}

/// `viewers` reading control viewers (plus one never reading when
/// `stalled`) of a fresh `cat` terminal. Returns what each reader saw and
/// this process's CPU seconds over the run.
async fn fan(
    registry: &Registry,
    owner: &OwnerId,
    name: &str,
    payload: &Path,
    viewers: usize,
    stalled: bool,
) -> (Vec<Seen>, f64) {
    spawn_cat(registry, owner, name, payload).await;
    let attacher = Attacher::new(registry.clone());
    let (start_tx, start_rx) = tokio::sync::watch::channel(None);
    let mut readers = Vec::new();
    for _ in 0..viewers {
        let viewer = attacher
            .attach(owner, name, AttachOptions::default())
            .await
            .unwrap();
        readers.push(viewer);
    }
    let idle = if stalled {
        Some(
            attacher
                .attach(owner, name, AttachOptions::default())
                .await
                .unwrap(),
        )
    } else {
        None
    };
    let cpu0 = cpu_secs(std::process::id());
    let start = Instant::now();
    start_tx.send(Some(start)).unwrap();
    registry
        .owner(owner)
        .write(name, Bytes::from_static(b"\r"))
        .await
        .unwrap();
    let tasks: Vec<_> = readers
        .into_iter()
        .map(|v| tokio::spawn(drain(v, start_rx.clone())))
        .collect();
    let mut seen = Vec::new();
    for task in tasks {
        seen.push(task.await.unwrap());
    }
    let cpu = cpu_secs(std::process::id()) - cpu0;
    drop(idle);
    attacher.shutdown().await;
    registry.owner(owner).kill(name).await.unwrap();
    (seen, cpu)
}

fn rates(seen: &[Seen], payload: usize) -> Vec<f64> {
    let mut rates: Vec<f64> = seen.iter().map(|s| payload as f64 / s.secs / 1e6).collect();
    rates.sort_by(f64::total_cmp);
    rates
}

async fn fanout(dir: &Path, payload: &Path, size: usize, expected: usize, counts: &[usize]) {
    let registry = open(&dir.join("fan")).await;
    let owner = OwnerId::new("bench").unwrap();
    let rounds = env_or("BENCH_FAN_ROUNDS", 2);
    let gib = |b: f64| b / (1u64 << 30) as f64;
    let best = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let least = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    for (case, &n) in counts.iter().enumerate() {
        // Best of `rounds`, the three runs alternated so machine noise
        // hits baseline, unstalled and stalled alike.
        let (mut base, mut med, mut min, mut smed, mut smin) =
            (vec![], vec![], vec![], vec![], vec![]);
        let (mut cpu_gib, mut run_gib, mut snaps) = (vec![], vec![], 0);
        for round in 0..rounds {
            let (run_secs, run_cpu) = engine_run(dir, payload, expected);
            base.push(size as f64 / run_secs / 1e6);
            run_gib.push(run_cpu / gib(expected as f64));
            let name = format!("f{case}-{round}");
            let (seen, cpu) = fan(&registry, &owner, &name, payload, n, false).await;
            let r = rates(&seen, size);
            med.push(r[r.len() / 2]);
            min.push(r[0]);
            let delivered: u64 = seen.iter().map(|s| s.bytes).sum();
            cpu_gib.push(cpu / gib(delivered as f64));
            // Each viewer's first snapshot is its join; the rest resyncs.
            snaps += seen
                .iter()
                .map(|s| s.snapshots.saturating_sub(1))
                .sum::<u32>();
            let name = format!("s{case}-{round}");
            let (seen, _) = fan(&registry, &owner, &name, payload, n, true).await;
            let r = rates(&seen, size);
            smed.push(r[r.len() / 2]);
            smin.push(r[0]);
            println!(
                "fanout {n:>3} round {round}: run {:.1} MB/s, viewers median {:.1}, with 1 stalled {:.1}",
                base[round], med[round], smed[round]
            );
        }
        let (base, med) = (best(&base), best(&med));
        println!(
            "fanout {n:>3} viewers: per-viewer {med:.1} MB/s median, {:.1} min (x{:.2} of run's {base:.1} MB/s); \
             engine CPU {:.2} s/GiB delivered (run: {:.2} s/GiB); {snaps} resync snapshots (best of {rounds})",
            best(&min),
            med / base,
            least(&cpu_gib),
            least(&run_gib),
        );
        let smed = best(&smed);
        println!(
            "fanout {n:>3} viewers + 1 stalled: others {smed:.1} MB/s median, {:.1} min ({:+.1}% vs unstalled median)",
            best(&smin),
            (smed / med - 1.0) * 100.0
        );
    }
    registry.dispose().await.unwrap();
}

async fn memory(dir: &Path, viewers: usize, secs: u64) {
    let registry = open(&dir.join("mem")).await;
    let owner = OwnerId::new("bench").unwrap();
    registry
        .owner(&owner)
        .spawn(
            SpawnSpec::new()
                .name("yes")
                .command(["yes", "a line of output for many viewers"]),
        )
        .await
        .unwrap();
    let me = std::process::id();
    let before = rss_kib(me);
    let attacher = Attacher::new(registry.clone());
    let mut counters = Vec::new();
    for _ in 0..viewers - 1 {
        let mut viewer = attacher
            .attach(&owner, "yes", AttachOptions::default())
            .await
            .unwrap();
        counters.push(tokio::spawn(async move {
            let mut n = 0u64;
            while let Some(event) = viewer.recv().await {
                if let ViewerEvent::Output { bytes, .. } = event {
                    n += bytes.len() as u64;
                }
            }
            n
        }));
    }
    let never = attacher
        .attach(&owner, "yes", AttachOptions::default())
        .await
        .unwrap();
    let start = Instant::now();
    let mut samples = Vec::new();
    for second in 1..=secs {
        tokio::time::sleep_until((start + Duration::from_secs(second)).into()).await;
        let rss = rss_kib(me);
        println!(
            "memory t={second:>3}s engine RSS {:>6.1} MiB",
            rss as f64 / 1024.0
        );
        samples.push(rss);
    }
    attacher.shutdown().await;
    drop(never);
    let mut total = 0;
    for counter in counters {
        total += counter.await.unwrap();
    }
    let peak = samples.iter().copied().max().unwrap_or(0);
    let half = samples.len() / 2;
    let growth = samples.last().copied().unwrap_or(0) as i64 - samples[half] as i64;
    println!(
        "memory {viewers} viewers of `yes`, 1 never reading, {secs} s: peak engine RSS {:.1} MiB \
         (before attaching {:.1} MiB), growth over the second half {:+.1} MiB; \
         {:.1} MB/s delivered per reading viewer",
        peak as f64 / 1024.0,
        before as f64 / 1024.0,
        growth as f64 / 1024.0,
        total as f64 / (viewers - 1) as f64 / secs as f64 / 1e6
    );
    registry.dispose().await.unwrap();
}

/// Waits until `viewer` prints `needle`.
async fn seen_by(viewer: &mut Viewer, needle: u8) {
    loop {
        match viewer.recv().await.expect("stream ended") {
            ViewerEvent::Output { bytes, .. } if bytes.contains(&needle) => return,
            _ => {}
        }
    }
}

async fn echo(dir: &Path, rounds: usize) {
    let registry = open(&dir.join("echo")).await;
    let owner = OwnerId::new("bench").unwrap();
    registry
        .owner(&owner)
        .spawn(SpawnSpec::new().name("cat").command(["cat"]))
        .await
        .unwrap();
    let attacher = Attacher::new(registry.clone());
    let mut viewer = attacher
        .attach(&owner, "cat", AttachOptions::default())
        .await
        .unwrap();
    // Each round types one letter and Enter: the tty echoes the letter
    // (the figure), then `cat` prints the line.
    let key = |round: usize| b'a' + (round % 26) as u8;
    // Warm up: the first round is not timed.
    viewer.input(Bytes::from_static(b"z\r")).await.unwrap();
    seen_by(&mut viewer, b'z').await;
    let mut engine = Vec::new();
    for round in 0..rounds {
        let start = Instant::now();
        viewer
            .input(Bytes::from(vec![key(round), b'\r']))
            .await
            .unwrap();
        seen_by(&mut viewer, key(round)).await;
        engine.push(start.elapsed());
    }
    drop(viewer);
    attacher.shutdown().await;
    registry.dispose().await.unwrap();

    let socket = dir.join("rawecho.sock");
    let socket = socket.to_str().unwrap();
    let tmux = |args: &[&str]| {
        let status = std::process::Command::new("tmux")
            .args(["-S", socket, "-f", "/dev/null"])
            .args(args)
            .status()
            .unwrap();
        assert!(status.success(), "tmux {args:?}");
    };
    tmux(&["new-session", "-d", "-x", "80", "-y", "24", "cat"]);
    let (_child, mut stdin, mut lines) = common::raw_control_client(socket);
    let mut raw = Vec::new();
    for round in 0..=rounds {
        let typed = if round == 0 {
            vec![b'z', b'\r']
        } else {
            vec![key(round - 1), b'\r']
        };
        let start = Instant::now();
        // The very command a viewer's input becomes.
        let mut line = String::new();
        for command in send_keys_hex(PaneId(0), &typed, 1024) {
            line.push_str(command.line());
            line.push('\n');
        }
        stdin.write_all(line.as_bytes()).await.unwrap();
        loop {
            let line = lines.next_line().await.unwrap().unwrap();
            if let Some(rest) = line.strip_prefix("%output ")
                && rest
                    .split_once(' ')
                    .is_some_and(|(_, text)| text.as_bytes().contains(&typed[0]))
            {
                break;
            }
        }
        if round > 0 {
            raw.push(start.elapsed());
        }
    }
    drop(stdin);
    tmux(&["kill-server"]);
    let (e, r) = (median(engine), median(raw));
    println!(
        "echo keystroke->echo via a control viewer {}  raw tmux -C {}  ratio {:.2} (median of {rounds})",
        ms(e),
        ms(r),
        e.as_secs_f64() / r.as_secs_f64()
    );
}

/// One viewer of `transport` on a fresh `cat` terminal: seconds to the
/// mark, bytes the viewer received.
async fn one_viewer(
    registry: &Registry,
    owner: &OwnerId,
    name: &str,
    payload: &Path,
    transport: Transport,
) -> (f64, u64) {
    spawn_cat(registry, owner, name, payload).await;
    let attacher = Attacher::new(registry.clone());
    let viewer = attacher
        .attach(owner, name, AttachOptions::default().transport(transport))
        .await
        .unwrap();
    let (start_tx, start_rx) = tokio::sync::watch::channel(None);
    start_tx.send(Some(Instant::now())).unwrap();
    registry
        .owner(owner)
        .write(name, Bytes::from_static(b"\r"))
        .await
        .unwrap();
    let seen = drain(viewer, start_rx).await;
    attacher.shutdown().await;
    registry.owner(owner).kill(name).await.unwrap();
    (seen.secs, seen.bytes)
}

async fn pty(dir: &Path, payload: &Path, size: usize, rounds: usize) {
    let registry = open(&dir.join("pty")).await;
    let owner = OwnerId::new("bench").unwrap();
    let mb_s = |secs: f64| size as f64 / secs / 1e6;
    let (mut control, mut pty) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let (c, cb) = one_viewer(
            &registry,
            &owner,
            &format!("c{round}"),
            payload,
            Transport::Control,
        )
        .await;
        let (p, pb) = one_viewer(
            &registry,
            &owner,
            &format!("p{round}"),
            payload,
            Transport::Pty,
        )
        .await;
        println!(
            "pty round {round}: control {:.1} MB/s ({:.1} MiB delivered), pty {:.1} MB/s ({:.1} MiB delivered)",
            mb_s(c),
            cb as f64 / 1048576.0,
            mb_s(p),
            pb as f64 / 1048576.0
        );
        control.push(Duration::from_secs_f64(c));
        pty.push(Duration::from_secs_f64(p));
    }
    let (c, p) = (median(control), median(pty));
    println!(
        "pty transport {:.1} MB/s  control transport {:.1} MB/s  (file to its end on screen, median of {rounds})",
        mb_s(p.as_secs_f64()),
        mb_s(c.as_secs_f64())
    );
    registry.dispose().await.unwrap();
}

fn main() {
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return; // `cargo test --benches` smoke mode: nothing to do
    }
    let mb = env_or("BENCH_MB", 64);
    let counts: Vec<usize> = std::env::var("BENCH_VIEWERS")
        .unwrap_or_else(|_| "1,10,100".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let run = |name: &str| only.is_empty() || only.split(',').any(|n| n.trim() == name);
    let dir = tempfile::Builder::new()
        .prefix("tebench")
        .tempdir_in("/tmp")
        .unwrap();
    let payload = dir.path().join("payload.bin");
    let (size, lines) = make_payload(&payload, mb);
    // The pty turns each \n into \r\n.
    let expected = size + lines;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        if run("fanout") {
            fanout(dir.path(), &payload, size, expected, &counts).await;
        }
        if run("memory") {
            memory(
                dir.path(),
                env_or("BENCH_FLOOD_VIEWERS", 100),
                env_or("BENCH_SECS", 30),
            )
            .await;
        }
        if run("echo") {
            echo(dir.path(), env_or("BENCH_ROUNDS", 100)).await;
        }
        if run("pty") {
            pty(dir.path(), &payload, size, env_or("BENCH_PTY_ROUNDS", 3)).await;
        }
    });
}
