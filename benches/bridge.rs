//! The web bridge, each figure beside a baseline from the same run:
//!
//! 1. one WebSocket viewer of `cat <file>` (env `BENCH_MB`, default 64):
//!    delivered MB/s against `tmux-engine run -- cat <file>` (goal ≥ 0.9×);
//! 2. 100 viewers of `yes`, one never reading, for `BENCH_SECS` (default
//!    30): server RSS (≤ 128 MiB, flat) and the readers' rate against 99
//!    viewers alone (within 10 %);
//! 3. keystroke to echo over a WebSocket against the library's raw write
//!    to output seen (`Registry::write` + `Registry::output`; goal ≤ 1.3×);
//! 4. `GET /api/terminals` with `BENCH_TERMINALS` (default 200) terminals
//!    against `Registry::list` in process (goal < 10 ms).
//!
//! `cargo bench --bench bridge` (`BENCH_ONLY=1..4` runs one).

mod common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::serve::{Serve, Socket};
use common::{env_or, median, ms, rss_kib};
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;

/// Reads binary frames until `marker` shows; the live bytes counted.
async fn read_until(socket: &mut Socket, marker: &[u8]) -> usize {
    let mut total = 0;
    let mut tail: Vec<u8> = Vec::new();
    while let Some(Ok(message)) = socket.next().await {
        if let Message::Binary(bytes) = message {
            total += bytes.len();
            tail.extend_from_slice(&bytes);
            if tail.windows(marker.len()).any(|w| w == marker) {
                return total;
            }
            let keep = tail.len().saturating_sub(marker.len());
            tail.drain(..keep);
        }
    }
    panic!("socket ended before the marker");
}

async fn cat_rate(mb: usize) {
    let file = tempfile::NamedTempFile::new().expect("payload");
    let line =
        b"The quick brown fox \t jumps \\ over \x1b[1mlazy\x1b[0m dogs 0123456789 \xc3\xa9\n";
    let mut writer = std::io::BufWriter::new(file.reopen().expect("payload"));
    let lines = mb * 1024 * 1024 / line.len();
    for _ in 0..lines {
        writer.write_all(line).expect("payload");
    }
    writer.flush().expect("payload");
    let bytes = (lines * line.len()) as f64;
    let path = file.path().display().to_string();

    let started = Instant::now();
    let mut run = Command::new(env!("CARGO_BIN_EXE_tmux-engine"))
        .args(["run", "--", "cat", &path])
        .stdout(Stdio::piped())
        .spawn()
        .expect("run");
    // Everything `run` prints, to its exit (the pane's bytes, `\n` as `\r\n`).
    let printed = std::io::copy(
        &mut run.stdout.take().expect("stdout"),
        &mut std::io::sink(),
    )
    .expect("reading run");
    assert!(
        printed as usize >= lines * line.len(),
        "run printed {printed} bytes"
    );
    let run_rate = bytes / started.elapsed().as_secs_f64() / 1e6;
    let _ = run.wait();

    let serve = Serve::start(&[]);
    let id = serve.spawn(&["sh"]).await;
    let mut socket = serve.ws(&id).await;
    let input = format!("cat {path}; echo end-$((40+2))\r");
    let started = Instant::now();
    socket
        .send(Message::Binary(input.into_bytes().into()))
        .await
        .expect("input");
    let delivered = read_until(&mut socket, b"end-42").await as f64;
    let ws_rate = delivered / started.elapsed().as_secs_f64() / 1e6;
    println!(
        "1. cat {mb} MiB: websocket viewer {ws_rate:.1} MB/s delivered ({:.0} % of the bytes live), \
         `run -- cat` {run_rate:.1} MB/s -> ratio {:.2} (goal >= 0.9)",
        100.0 * delivered / bytes,
        ws_rate / run_rate
    );
}

/// `viewers` readers (plus one that never reads when `stuck`) on `yes`
/// for `secs`: the readers' mean MB/s and the server's RSS samples (KiB).
async fn fan_out(viewers: usize, stuck: bool, secs: u64) -> (f64, Vec<u64>) {
    let serve = Serve::start(&[]);
    let id = serve.spawn(&["sh"]).await;
    let _never = if stuck {
        Some(serve.ws(&id).await)
    } else {
        None
    };
    let mut readers = Vec::new();
    for _ in 0..viewers {
        readers.push(serve.ws(&id).await);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    let mut typist = serve.ws(&id).await;
    typist
        .send(Message::Binary(b"yes\r".to_vec().into()))
        .await
        .expect("input");
    let counts: Vec<_> = readers
        .into_iter()
        .map(|mut socket| {
            tokio::spawn(async move {
                let mut total = 0usize;
                while let Ok(Some(Ok(message))) =
                    tokio::time::timeout_at(deadline, socket.next()).await
                {
                    total += message.len();
                }
                total
            })
        })
        .collect();
    let pid = serve.child.id();
    let mut rss = Vec::new();
    while tokio::time::Instant::now() < deadline {
        rss.push(rss_kib(pid));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let mut total = 0usize;
    for count in counts {
        total += count.await.expect("reader");
    }
    typist
        .send(Message::Binary(b"\x03".to_vec().into()))
        .await
        .expect("ctrl-c");
    (total as f64 / viewers as f64 / secs as f64 / 1e6, rss)
}

async fn latency(rounds: usize) {
    let serve = Serve::start(&[]);
    let id = serve.spawn(&["cat"]).await;
    let mut socket = serve.ws(&id).await;
    let mut ws = Vec::new();
    for round in 0..rounds {
        let key = [b'a' + (round % 26) as u8];
        let started = Instant::now();
        socket
            .send(Message::Binary(key.to_vec().into()))
            .await
            .expect("key");
        read_until(&mut socket, &key).await;
        ws.push(started.elapsed());
    }
    let dir = tempfile::Builder::new()
        .prefix("tmuxeng")
        .tempdir_in("/tmp")
        .expect("temp dir");
    let config = tmux_engine::backend::TmuxConfig::new(dir.path().join("rt"));
    let (registry, _) = tmux_engine::backend::open_registry(dir.path().join("state"), config)
        .await
        .expect("registry");
    let owner = tmux_engine::registry::OwnerId::new("bench").expect("owner");
    let spec = tmux_engine::registry::SpawnSpec::default().command(["cat"]);
    let snapshot = registry.owner(&owner).spawn(spec).await.expect("spawn");
    let target = snapshot.id.to_string();
    let mut output = registry
        .owner(&owner)
        .output(&target)
        .await
        .expect("output");
    let mut lib = Vec::new();
    for round in 0..rounds {
        let key = [b'a' + (round % 26) as u8];
        let started = Instant::now();
        registry
            .owner(&owner)
            .write(&target, key.to_vec().into())
            .await
            .expect("write");
        while let Some(event) = output.next().await {
            if matches!(&event, tmux_engine::control::client::PaneEvent::Output(bytes) if bytes.contains(&key[0]))
            {
                break;
            }
        }
        lib.push(started.elapsed());
    }
    let _ = registry.owner(&owner).kill(&target).await;
    registry.shutdown().await;
    let (ws, lib) = (median(ws), median(lib));
    println!(
        "3. keystroke to echo, median of {rounds}: websocket {}, library write+output {} -> ratio {:.2} (goal <= 1.3)",
        ms(ws),
        ms(lib),
        ws.as_secs_f64() / lib.as_secs_f64()
    );
}

async fn list_latency(terminals: usize) {
    let serve = Serve::start(&[]);
    for _ in 0..terminals {
        serve.spawn(&["sleep", "3600"]).await;
    }
    let client = reqwest::Client::new();
    let url = format!("{}/api/terminals", serve.base);
    let mut http = Vec::new();
    for _ in 0..30 {
        let started = Instant::now();
        let body = client
            .get(&url)
            .bearer_auth(&serve.token)
            .send()
            .await
            .expect("GET");
        let text = body.text().await.expect("body");
        http.push(started.elapsed());
        assert!(
            text.matches("\"id\"").count() == terminals,
            "listed {text:.200}"
        );
    }
    let config = tmux_engine::backend::TmuxConfig::for_state_dir(&serve.dir.path().join("state"));
    let (registry, _) = tmux_engine::backend::open_registry(serve.dir.path().join("state"), config)
        .await
        .expect("registry");
    let owner = tmux_engine::registry::OwnerId::new("bench").expect("owner");
    let mut lib = Vec::new();
    for _ in 0..30 {
        let started = Instant::now();
        registry.owner(&owner).list().await.expect("list");
        lib.push(started.elapsed());
    }
    registry.shutdown().await;
    println!(
        "4. list of {terminals} terminals, median of 30: GET /api/terminals {}, Registry::list in process {} (goal < 10 ms)",
        ms(median(http)),
        ms(median(lib))
    );
}

#[tokio::main]
async fn main() {
    let only: usize = env_or("BENCH_ONLY", 0);
    if only == 0 || only == 1 {
        cat_rate(env_or("BENCH_MB", 64)).await;
    }
    if only == 0 || only == 2 {
        let secs = env_or("BENCH_SECS", 30);
        let (alone, _) = fan_out(99, false, secs).await;
        let (with_stuck, rss) = fan_out(99, true, secs).await;
        let half = rss.len() / 2;
        println!(
            "2. 100 viewers of `yes` for {secs} s, one never reading: readers {with_stuck:.2} MB/s each \
             vs 99 alone {alone:.2} MB/s -> ratio {:.2} (goal >= 0.9); server RSS peak {:.1} MiB, \
             growth over the second half {:+.1} MiB (goal <= 128 MiB, flat)",
            with_stuck / alone,
            *rss.iter().max().unwrap_or(&0) as f64 / 1024.0,
            (*rss.last().unwrap_or(&0) as f64 - rss.get(half).copied().unwrap_or(0) as f64)
                / 1024.0
        );
    }
    if only == 0 || only == 3 {
        latency(200).await;
    }
    if only == 0 || only == 4 {
        list_latency(env_or("BENCH_TERMINALS", 200)).await;
    }
}
