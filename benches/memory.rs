//! Memory under a flood nobody reads: a pane runs `yes` for 30 s while its
//! only subscriber never takes an event. The engine must keep reading tmux
//! (or tmux blocks the program) yet hold memory flat: the subscriber's queue
//! is bounded, the pane gets paused in tmux, and nothing else buffers.
//!
//! `cargo bench --bench memory` (env `BENCH_SECS`, default 30). Prints the
//! engine's RSS every second, its peak and its growth over the second half.
//! Target: under 64 MiB and flat.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tmux_engine::control::client::ClientOptions;
use tmux_engine::control::client::SubscribeOptions;
use tmux_engine::terminal::{Parts, launch};
use tmux_engine::tmux::procfs;
use tmux_engine::tmux::{ServerOptions, Tmux};

use common::{env_or, rss_kib};

/// CPU time process `pid` used so far, user and kernel, in clock ticks; 0
/// once it is gone.
fn cpu_ticks(pid: u32) -> u64 {
    procfs::stat(pid).map_or(0, |stat| stat.utime + stat.stime)
}

#[tokio::main]
async fn main() {
    let secs: u64 = env_or("BENCH_SECS", 30);
    let dir = tempfile::Builder::new()
        .prefix("tmuxeng-bench")
        .tempdir_in("/tmp")
        .expect("temp dir");
    let tmux = Arc::new(Tmux::discover().expect("tmux"));
    let server_opts = ServerOptions::default()
        .command(vec![
            "yes".into(),
            "a line of output that never gets read".into(),
        ])
        .runtime_dir(Some(dir.path().to_path_buf()));
    let parts = launch(
        tmux,
        server_opts,
        ClientOptions::default(),
        SubscribeOptions::default(),
    )
    .await
    .expect("terminal");
    let Parts {
        server: term,
        client,
        output: stream,
        ..
    } = parts;
    let me = std::process::id();
    let server = term.pid();
    let program = term.first_pane().pid;
    let mut events = client.subscribe_events();
    let counter = tokio::spawn(async move {
        let mut n = 0u64;
        loop {
            match events.recv().await {
                Ok(_) => n += 1,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(k)) => n += k,
                Err(_) => return n,
            }
        }
    });

    let start = Instant::now();
    let mut samples = Vec::new();
    let program_cpu0 = cpu_ticks(program);
    for second in 1..=secs {
        tokio::time::sleep_until((start + Duration::from_secs(second)).into()).await;
        let rss = rss_kib(me);
        println!(
            "t={second:>3}s engine RSS {:>6.1} MiB, tmux server RSS {:>6.1} MiB, `yes` alive: {}",
            rss as f64 / 1024.0,
            rss_kib(server) as f64 / 1024.0,
            tmux_engine::tmux::process::is_alive(program)
        );
        samples.push(rss);
    }
    let program_cpu = cpu_ticks(program) - program_cpu0;
    let server_cpu = cpu_ticks(server);
    let peak = samples.iter().copied().max().unwrap_or(0);
    let half = samples.len() / 2;
    let growth = samples.last().copied().unwrap_or(0) as i64 - samples[half] as i64;
    drop(stream);
    term.kill().await.expect("kill");
    drop(client);
    let events = counter.await.unwrap_or(0);
    println!(
        "peak engine RSS {:.1} MiB; growth over the second half {:+.1} MiB; \
         {events} events seen by an observer; CPU used: `yes` {:.1} s, tmux server {:.1} s",
        peak as f64 / 1024.0,
        growth as f64 / 1024.0,
        program_cpu as f64 / 100.0,
        server_cpu as f64 / 100.0
    );
}
