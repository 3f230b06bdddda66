//! A paste: `BENCH_PASTE_KIB` (default 1024) KiB of every byte value typed
//! into a pane running `stty raw -echo; head -c N > FILE`, timed from the
//! first command to the file being whole, and checked byte for byte. Each
//! way in one run:
//!
//! raw `tmux -C`, no engine (the baselines):
//! 1. `send-keys -H`, 1 KiB per command: what the engine did before, and
//!    tmux's own rate for it (on `BENCH_HEX_KIB`, default 256, it is slow);
//! 2. `set-buffer` + `paste-buffer -r`, 64 KiB pieces, NUL by `send-keys`;
//! 3. `load-buffer FILE` + the guarded `paste-buffer -r`, 64 KiB pieces,
//!    every command at once: the engine's method done by hand;
//!
//! the engine (ratios are to 3):
//! 4. the library: `ControlClient::send_bytes` (`Terminal::send_text`),
//!    with the worst `capture-pane` latency of the same client meanwhile;
//! 5. the registry: `Registry::write`;
//! 6. serve: one WebSocket binary frame, with serve's RSS growth and the
//!    worst `GET .../screen` latency meanwhile; then `BENCH_PARALLEL`
//!    (default 8) terminals pasted at once, serve's peak RSS growth.
//!
//! `cargo bench --bench paste` (`BENCH_ONLY=1..6` runs one).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::serve::{Serve, Socket};
use common::{env_or, ms, raw_control_client, rss_kib};
use futures_util::SinkExt;
use tmux_engine::backend::{TmuxConfig, open_registry};
use tmux_engine::control::client::ClientOptions;
use tmux_engine::control::client::SubscribeOptions;
use tmux_engine::registry::{OwnerId, SpawnSpec, WaitCondition};
use tmux_engine::terminal::launch;
use tmux_engine::tmux::input::{PASTE_CHUNK, load_buffer, paste_buffer_exact};
use tmux_engine::tmux::{ServerOptions, Tmux, TmuxCommand, quote, send_keys_hex_chunk};
use tmux_engine::vocab::PaneId;
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::tungstenite::Message;

const PANE: PaneId = PaneId(0);

/// `len` bytes with every byte value at every offset mod 256, and the
/// sequences a careless path changes (LF/CR, key names, ESC, NUL).
fn payload(len: usize) -> Vec<u8> {
    let specials: &[&[u8]] = &[
        b"\n\r\r\n",
        b"Enter C-c ; kill-server",
        b"\x1b[200~\x1b[A",
        b"\xff\xfe\0\0",
    ];
    let mut data = Vec::with_capacity(len + 64);
    let mut i = 0usize;
    while data.len() < len {
        if i.is_multiple_of(4096) {
            data.extend_from_slice(specials[(i / 4096) % specials.len()]);
        }
        data.push((i.wrapping_mul(251) ^ (i >> 8)) as u8);
        i += 1;
    }
    data.truncate(len);
    data
}

/// The pane's program: raw tty, `ready`, then exactly `len` bytes to `out`.
fn script(out: &Path, len: usize) -> String {
    format!(
        "stty raw -echo; echo ready; head -c {len} > '{}'; sleep 3600",
        out.display()
    )
}

/// Waits (polling, 1 ms) until `out` holds `want.len()` bytes, checks them
/// and returns the time since `start`.
async fn whole(out: &Path, want: &[u8], start: Instant) -> Duration {
    let deadline = start + Duration::from_secs(300);
    loop {
        let len = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
        if len as usize >= want.len() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} not whole: {len} bytes",
            out.display()
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let took = start.elapsed();
    let got = std::fs::read(out).expect("the pasted file");
    assert!(
        got == want,
        "{}: the program received other bytes",
        out.display()
    );
    took
}

fn mbps(len: usize, took: Duration) -> f64 {
    len as f64 / took.as_secs_f64() / 1e6
}

/// A raw server running [`script`] and a raw `tmux -C` on it, attached and
/// with the pane in raw mode.
struct Raw {
    socket: String,
    stdin: tokio::process::ChildStdin,
    _child: tokio::process::Child,
}

impl Raw {
    async fn start(dir: &Path, name: &str, out: &Path, len: usize) -> Raw {
        let socket = dir.join(format!("{name}.sock")).display().to_string();
        let status = Command::new("tmux")
            .args(["-S", &socket, "-f", "/dev/null", "new-session", "-d"])
            .args(["-x", "80", "-y", "24", &script(out, len)])
            .status()
            .expect("tmux");
        assert!(status.success());
        // tmux prints `ready` after `stty raw`; polled with capture-pane.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let shown = Command::new("tmux")
                .args(["-S", &socket, "capture-pane", "-p", "-t", "%0"])
                .output()
                .expect("tmux");
            if String::from_utf8_lossy(&shown.stdout).contains("ready") {
                break;
            }
            assert!(Instant::now() < deadline, "the raw pane never got ready");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let (child, stdin, mut lines) = raw_control_client(&socket);
        // tmux 3.3a reads stdin before its attach ran: wait for its block.
        while let Some(line) = lines.next_line().await.expect("tmux -C") {
            if line.starts_with("%end") || line.starts_with("%error") {
                break;
            }
        }
        // Replies are read and dropped, so tmux never blocks writing them.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Raw {
            socket,
            stdin,
            _child: child,
        }
    }

    async fn write(&mut self, text: &str) {
        self.stdin
            .write_all(text.as_bytes())
            .await
            .expect("tmux -C stdin");
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-S", &self.socket, "kill-server"])
            .stderr(Stdio::null())
            .status();
    }
}

fn line(command: &TmuxCommand, text: &mut String) {
    text.push_str(command.line());
    text.push('\n');
}

/// 1: `send-keys -H`, 1 KiB per command, every command at once.
async fn raw_hex(dir: &Path, data: &[u8]) -> Duration {
    let out = dir.join("raw-hex.out");
    let mut raw = Raw::start(dir, "raw-hex", &out, data.len()).await;
    let start = Instant::now();
    let mut text = String::new();
    for part in data.chunks(1024) {
        line(&send_keys_hex_chunk(PANE, part), &mut text);
    }
    raw.write(&text).await;
    whole(&out, data, start).await
}

/// 2: `set-buffer` (quoted) + `paste-buffer -r`; NUL goes by `send-keys`.
async fn raw_set_buffer(dir: &Path, data: &[u8]) -> Duration {
    let out = dir.join("raw-set.out");
    let mut raw = Raw::start(dir, "raw-set", &out, data.len()).await;
    let start = Instant::now();
    let mut text = String::new();
    for part in data.chunks(PASTE_CHUNK) {
        for (i, run) in part.split(|&b| b == 0).enumerate() {
            if i > 0 {
                line(&send_keys_hex_chunk(PANE, b"\0"), &mut text);
            }
            if !run.is_empty() {
                text.push_str("set-buffer -b raw -- ");
                text.push_str(&quote(run).expect("no NUL in a run"));
                text.push('\n');
                line(&paste_buffer_exact(PANE, "raw"), &mut text);
            }
        }
    }
    raw.write(&text).await;
    whole(&out, data, start).await
}

/// 3: the engine's commands by hand: each piece to a file, `load-buffer`,
/// guarded `paste-buffer -r -d`, every command at once.
async fn raw_load_buffer(dir: &Path, data: &[u8]) -> Duration {
    let out = dir.join("raw-load.out");
    let pieces = dir.join("raw-pieces");
    std::fs::create_dir_all(&pieces).expect("pieces dir");
    let mut raw = Raw::start(dir, "raw-load", &out, data.len()).await;
    let start = Instant::now();
    let mut text = String::new();
    for (i, part) in data.chunks(PASTE_CHUNK).enumerate() {
        let file = pieces.join(format!("{i}.paste"));
        std::fs::write(&file, part).expect("piece");
        line(&load_buffer("raw", &file), &mut text);
        line(&paste_buffer_exact(PANE, "raw"), &mut text);
    }
    raw.write(&text).await;
    whole(&out, data, start).await
}

/// 4: the library, with the worst capture latency of the same client
/// while the paste is typed.
async fn library(dir: &Path, data: &[u8]) -> (Duration, Duration, usize) {
    let out = dir.join("library.out");
    let tmux = Arc::new(Tmux::discover().expect("tmux"));
    let mut opts = ServerOptions::default()
        .runtime_dir(Some(dir.join("rt")))
        .shell(Some(PathBuf::from("/bin/sh")));
    opts.command = ["sh", "-c", &script(&out, data.len())]
        .iter()
        .map(Into::into)
        .collect();
    let parts = launch(
        tmux,
        opts,
        ClientOptions::default(),
        SubscribeOptions::default(),
    )
    .await
    .expect("launch");
    let mut output = parts.output;
    let mut seen = Vec::new();
    while !seen.windows(5).any(|w| w == b"ready") {
        match output.recv().await.expect("output") {
            tmux_engine::control::client::PaneEvent::Output(b) => seen.extend_from_slice(&b),
            tmux_engine::control::client::PaneEvent::Resync(s) => seen.extend(s.to_ansi()),
        }
    }
    let client = parts.client.clone();
    let start = Instant::now();
    let paste = tokio::spawn({
        let client = client.clone();
        let data = data.to_vec();
        async move { client.send_bytes(PANE, &data).await }
    });
    let capture = TmuxCommand::new("capture-pane").flag("-p").target(PANE);
    let (mut worst, mut captures) = (Duration::ZERO, 0);
    while !paste.is_finished() {
        let asked = Instant::now();
        client.command(&capture).await.expect("capture");
        worst = worst.max(asked.elapsed());
        captures += 1;
    }
    paste.await.expect("task").expect("send_bytes");
    let took = whole(&out, data, start).await;
    drop(output);
    parts.server.kill().await.expect("kill");
    (took, worst, captures)
}

/// 5: `Registry::write`.
async fn registry(dir: &Path, data: &[u8]) -> Duration {
    let out = dir.join("registry.out");
    let config = TmuxConfig::new(dir.join("rt")).shell("/bin/sh");
    let (registry, _) = open_registry(dir.join("state"), config)
        .await
        .expect("registry");
    let owner = OwnerId::new("bench").expect("owner");
    let spec = SpawnSpec::new().command(["sh", "-c", &script(&out, data.len())]);
    let id = registry
        .owner(&owner)
        .spawn(spec)
        .await
        .expect("spawn")
        .id
        .to_string();
    let ready = WaitCondition::Text("ready".to_owned());
    registry
        .owner(&owner)
        .wait(&id, &ready, Duration::from_secs(10))
        .await
        .expect("ready");
    let start = Instant::now();
    registry
        .owner(&owner)
        .write(&id, Bytes::copy_from_slice(data))
        .await
        .expect("write");
    let took = whole(&out, data, start).await;
    let _ = registry.owner(&owner).kill(&id).await;
    registry.dispose().await.expect("dispose");
    took
}

/// What the paste bench asks of its `serve` beyond the shared helper.
trait PasteServe {
    async fn screen(&self, id: &str) -> Duration;
    async fn terminal(&self, out: &Path, len: usize) -> (String, Socket);
}

impl PasteServe for Serve {
    /// `GET .../screen` once; its latency.
    async fn screen(&self, id: &str) -> Duration {
        let asked = Instant::now();
        let answer = self
            .http
            .get(format!("{}/api/terminals/{id}/screen", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .expect("screen");
        assert!(answer.status().is_success(), "screen: {}", answer.status());
        asked.elapsed()
    }

    /// A terminal running [`script`] with a viewer whose pane is ready.
    async fn terminal(&self, out: &Path, len: usize) -> (String, Socket) {
        let id = self.spawn(&["sh", "-c", &script(out, len)]).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let screen: serde_json::Value = self
                .http
                .get(format!("{}/api/terminals/{id}/screen", self.base))
                .bearer_auth(&self.token)
                .send()
                .await
                .expect("screen")
                .json()
                .await
                .expect("json");
            if screen.to_string().contains("ready") {
                break;
            }
            assert!(Instant::now() < deadline, "the pane never got ready");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let socket = self.ws(&id).await;
        (id, socket)
    }
}

/// Samples serve's RSS every 5 ms until `stop`; the peak in KiB.
fn peak_rss(pid: u32, stop: Arc<AtomicU64>) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let mut peak = 0;
        while stop.load(Ordering::Relaxed) == 0 {
            peak = peak.max(rss_kib(pid));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        peak.max(rss_kib(pid))
    })
}

/// 6: serve's WebSocket: one frame, then `parallel` at once.
async fn serve(data: &[u8], parallel: usize) -> (Duration, Duration, i64, i64) {
    let serve = Serve::start(&[]);
    let dir = serve.dir.path().to_owned();
    let out = dir.join("ws.out");
    let (id, mut socket) = serve.terminal(&out, data.len()).await;
    let before = serve.rss() as i64;
    let stop = Arc::new(AtomicU64::new(0));
    let peak = peak_rss(serve.child.id(), stop.clone());
    let start = Instant::now();
    socket
        .send(Message::Binary(Bytes::copy_from_slice(data)))
        .await
        .expect("input frame");
    let mut worst = Duration::ZERO;
    let waited = whole(&out, data, start);
    tokio::pin!(waited);
    let took = loop {
        tokio::select! {
            took = &mut waited => break took,
            latency = serve.screen(&id) => worst = worst.max(latency),
        }
    };
    stop.store(1, Ordering::Relaxed);
    let one = peak.await.expect("sampler") as i64 - before;

    let mut viewers = Vec::new();
    for i in 0..parallel {
        let out = dir.join(format!("ws-{i}.out"));
        let (_, socket) = serve.terminal(&out, data.len()).await;
        viewers.push((out, socket));
    }
    let before = serve.rss() as i64;
    let stop = Arc::new(AtomicU64::new(0));
    let peak = peak_rss(serve.child.id(), stop.clone());
    let start = Instant::now();
    for (_, socket) in &mut viewers {
        socket
            .send(Message::Binary(Bytes::copy_from_slice(data)))
            .await
            .expect("input frame");
    }
    for (out, _) in &viewers {
        whole(out, data, start).await;
    }
    stop.store(1, Ordering::Relaxed);
    let many = peak.await.expect("sampler") as i64 - before;
    drop(socket);
    (took, worst, one, many)
}

#[tokio::main]
async fn main() {
    let len = env_or("BENCH_PASTE_KIB", 1024usize) * 1024;
    let hex_len = env_or("BENCH_HEX_KIB", 256usize) * 1024;
    let parallel = env_or("BENCH_PARALLEL", 8usize);
    let only: usize = env_or("BENCH_ONLY", 0);
    let run = |n: usize| only == 0 || only == n;
    let dir = tempfile::Builder::new()
        .prefix("tmuxeng")
        .tempdir_in("/tmp")
        .expect("temp dir");
    let data = payload(len);
    let kib = len / 1024;
    println!("paste of {kib} KiB of every byte value into `stty raw -echo; head -c N > FILE`");
    if run(1) {
        let hex = payload(hex_len);
        let took = raw_hex(dir.path(), &hex).await;
        println!(
            "1. raw send-keys -H (1 KiB/command), {} KiB: {}  {:.2} MB/s",
            hex_len / 1024,
            ms(took),
            mbps(hex_len, took)
        );
    }
    if run(2) {
        let took = raw_set_buffer(dir.path(), &data).await;
        println!(
            "2. raw set-buffer + paste-buffer -r: {}  {:.2} MB/s",
            ms(took),
            mbps(len, took)
        );
    }
    let mut base = None;
    if run(3) || only == 0 {
        let took = raw_load_buffer(dir.path(), &data).await;
        base = Some(mbps(len, took));
        println!(
            "3. raw load-buffer + guarded paste-buffer -r (baseline): {}  {:.2} MB/s",
            ms(took),
            mbps(len, took)
        );
    }
    let ratio = |rate: f64| base.map_or(String::new(), |b| format!("  ratio {:.2}", rate / b));
    if run(4) {
        let (took, worst, captures) = library(dir.path(), &data).await;
        println!(
            "4. library send_bytes: {}  {:.2} MB/s{}  ({captures} captures meanwhile, worst {})",
            ms(took),
            mbps(len, took),
            ratio(mbps(len, took)),
            ms(worst)
        );
    }
    if run(5) {
        let took = registry(dir.path(), &data).await;
        println!(
            "5. Registry::write: {}  {:.2} MB/s{}",
            ms(took),
            mbps(len, took),
            ratio(mbps(len, took))
        );
    }
    if run(6) {
        let (took, worst, one, many) = serve(&data, parallel).await;
        println!(
            "6. serve WebSocket frame: {}  {:.2} MB/s{}  (GET screen worst {}); serve RSS +{:.1} MiB \
             for one paste, +{:.1} MiB peak for {parallel} at once",
            ms(took),
            mbps(len, took),
            ratio(mbps(len, took)),
            ms(worst),
            one as f64 / 1024.0,
            many as f64 / 1024.0
        );
    }
}
