//! What `keep_history` costs (issue 26): the same registry terminal
//! `cat`s a 64 MiB file with and without its output kept on disk, rounds
//! alternating so machine noise hits both alike. Timed from the spawn to
//! the moment the stream holds every byte (what a viewer or an agent
//! sees); for the kept one also to the moment the files hold them all.
//!
//! `cargo bench --bench history` (env `BENCH_MB`, default 64;
//! `BENCH_ROUNDS`, default 3). Target: at most 5 % slower with it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{env_or, make_payload, median, ms};
use tmux_engine::backend::{TmuxBackend, TmuxConfig};
use tmux_engine::registry::{Backend, OwnerId, Registry, RegistryConfig, SpawnSpec};

/// Polls (a bench, not a test: 2 ms steps) until `done` says yes.
async fn until(mut done: impl AsyncFnMut() -> bool) {
    while !done().await {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// One round: seconds until the stream holds `bytes`, and (kept) until
/// the files do.
async fn round(
    registry: &Registry,
    payload: &std::path::Path,
    bytes: u64,
    keep: bool,
) -> (Duration, Option<Duration>) {
    let owner = OwnerId::new("bench").unwrap();
    let owned = || registry.owner(&owner);
    let script = format!("stty -opost; cat {}; exec sleep 1000", payload.display());
    let start = Instant::now();
    let spawned = owned()
        .spawn(
            SpawnSpec::new()
                .command(["/bin/sh", "-c", &script])
                .keep_history(keep),
        )
        .await
        .unwrap();
    let id = spawned.id.to_string();
    until(async || owned().output_end(&id).await.unwrap().unwrap().offset >= bytes).await;
    let streamed = start.elapsed();
    let on_disk = if keep {
        until(async || {
            owned()
                .kept_history(&id, None)
                .await
                .map(|k| k.end().offset >= bytes)
                .unwrap_or(false)
        })
        .await;
        Some(start.elapsed())
    } else {
        None
    };
    owned().kill(&id).await.unwrap();
    (streamed, on_disk)
}

fn main() {
    let mb: usize = env_or("BENCH_MB", 64);
    let rounds: usize = env_or("BENCH_ROUNDS", 3);
    let dir = tempfile::tempdir().unwrap();
    let payload = dir.path().join("payload");
    let (bytes, _) = make_payload(&payload, mb);
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
        let (mut plain, mut kept, mut disk) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            plain.push(round(&registry, &payload, bytes as u64, false).await.0);
            let (streamed, on_disk) = round(&registry, &payload, bytes as u64, true).await;
            kept.push(streamed);
            disk.extend(on_disk);
        }
        let (plain, kept, disk) = (median(plain), median(kept), median(disk));
        let rate = |d: Duration| bytes as f64 / d.as_secs_f64() / (1 << 20) as f64;
        println!("{mb} MiB cat through a registry terminal, median of {rounds}:");
        println!(
            "  without keep_history: {} ({:.0} MiB/s)",
            ms(plain),
            rate(plain)
        );
        println!(
            "  with keep_history:    {} ({:.0} MiB/s)",
            ms(kept),
            rate(kept)
        );
        println!(
            "  ... all on disk:      {} ({:.0} MiB/s)",
            ms(disk),
            rate(disk)
        );
        println!(
            "  cost: {:+.1} %",
            (kept.as_secs_f64() / plain.as_secs_f64() - 1.0) * 100.0
        );
        registry.dispose().await.unwrap();
    });
}
