//! What hostile output costs the engine (issue 46, item 3): a registry
//! terminal `cat`s a file of `ESC ] 7 ;` repeated (OSC 7 intros with no
//! end, the flood that once made the output path look 4,352 bytes ahead
//! per intro) and a file of plain text of the same size, rounds
//! alternating so machine noise hits both alike. Measured: this process's
//! CPU time (user + system, all its threads: the reader, the stream and
//! its scanners) and the wall time from the spawn until the stream holds
//! every byte. tmux's own parsing is in its own process, not counted.
//!
//! `cargo bench --bench osc_flood` (env `BENCH_MB`, default 8;
//! `BENCH_ROUNDS`, default 3). Target: the flood costs at most 2x the
//! plain text.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{env_or, median, ms};
use tmux_engine::backend::{TmuxBackend, TmuxConfig};
use tmux_engine::registry::{Backend, OwnerId, Registry, RegistryConfig, SpawnSpec};

/// Polls (a bench, not a test: 2 ms steps) until `done` says yes.
async fn until(mut done: impl AsyncFnMut() -> bool) {
    while !done().await {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// This process's CPU time so far (`/proc/self/stat` utime + stime).
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // The command name may hold blanks: fields count from after its `)`.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // /proc counts in USER_HZ, 100 on every Linux.
    Duration::from_millis(ticks * 10)
}

/// One round: (CPU, wall) until the stream holds `bytes` of `payload`.
async fn round(registry: &Registry, payload: &std::path::Path, bytes: u64) -> (Duration, Duration) {
    let owner = OwnerId::new("bench").unwrap();
    let owned = || registry.owner(&owner);
    let script = format!("stty -opost; cat {}; exec sleep 1000", payload.display());
    let (cpu_start, start) = (cpu(), Instant::now());
    let spawned = owned()
        .spawn(SpawnSpec::new().command(["/bin/sh", "-c", &script]))
        .await
        .unwrap();
    let id = spawned.id.to_string();
    until(async || owned().output_end(&id).await.unwrap().unwrap().offset >= bytes).await;
    let took = (cpu() - cpu_start, start.elapsed());
    owned().kill(&id).await.unwrap();
    took
}

fn main() {
    let mb: usize = env_or("BENCH_MB", 8);
    let rounds: usize = env_or("BENCH_ROUNDS", 3);
    let dir = tempfile::tempdir().unwrap();
    let size = mb << 20;
    let hostile = dir.path().join("hostile");
    std::fs::write(&hostile, b"\x1b]7;".repeat(size / 4)).unwrap();
    let plain = dir.path().join("plain");
    let line = b"plain text of the same size, nothing to scan for 0123456789abcdef\n";
    let mut text = line.repeat(size / line.len() + 1);
    text.truncate(size / 4 * 4);
    std::fs::write(&plain, &text).unwrap();
    let bytes = text.len() as u64;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let config = TmuxConfig::new(dir.path().join("rt")).pool_size(0);
        let backend: Arc<dyn Backend> = Arc::new(TmuxBackend::new(config).unwrap());
        let (registry, _) = Registry::open_with(
            RegistryConfig::default().state_dir(dir.path().join("state")),
            backend,
        )
        .await
        .unwrap();
        let (mut plain_cpu, mut plain_wall, mut flood_cpu, mut flood_wall) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            let (c, w) = round(&registry, &plain, bytes).await;
            plain_cpu.push(c);
            plain_wall.push(w);
            let (c, w) = round(&registry, &hostile, bytes).await;
            flood_cpu.push(c);
            flood_wall.push(w);
        }
        let (pc, pw) = (median(plain_cpu), median(plain_wall));
        let (fc, fw) = (median(flood_cpu), median(flood_wall));
        println!("{mb} MiB through a registry terminal, median of {rounds}:");
        println!("  plain text:     CPU {}, wall {}", ms(pc), ms(pw));
        println!("  OSC 7 flood:    CPU {}, wall {}", ms(fc), ms(fw));
        println!(
            "  flood / plain:  CPU {:.2}x, wall {:.2}x (target: at most 2x)",
            fc.as_secs_f64() / pc.as_secs_f64().max(1e-9),
            fw.as_secs_f64() / pw.as_secs_f64().max(1e-9)
        );
        registry.dispose().await.unwrap();
    });
}
