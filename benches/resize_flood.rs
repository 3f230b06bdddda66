//! A flood of WebSocket resize frames (issue 14, item 11): how long after
//! the last of `BENCH_RESIZES` (default 10 000) frames the terminal has
//! settled, beside raw tmux doing what one command per frame would cost.
//!
//! - engine: one viewer sends the frames back to back, then a keystroke;
//!   the figure is from the flood's last byte written to the keystroke's
//!   echo (the bridge applies a pending resize before the input after it,
//!   so the echo means the last size is in place), and the number of
//!   resizes the terminal actually went through (the viewer is told each);
//!   median of `BENCH_ROUNDS` (default 5); goal: settled within 1 s.
//! - the same keystroke's echo with no flood before it (the floor).
//! - raw tmux: `BENCH_RESIZES` `resize-window` commands pipelined through
//!   one `tmux -C` client to their last reply: the least that applying
//!   every frame would take.
//!
//! `cargo bench --bench resize_flood`.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::serve::{Serve, Socket};
use common::{env_or, median, ms};
use futures_util::{SinkExt, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio_tungstenite::tungstenite::Message;

/// Reads until `marker` is echoed; returns the resize frames seen.
async fn until_echo(socket: &mut Socket, marker: &[u8]) -> usize {
    let mut resizes = 0;
    let mut tail = Vec::new();
    while let Some(Ok(message)) = socket.next().await {
        match message {
            Message::Binary(bytes) => {
                tail.extend_from_slice(&bytes);
                if tail.windows(marker.len()).any(|w| w == marker) {
                    return resizes;
                }
                tail.drain(..tail.len().saturating_sub(marker.len()));
            }
            Message::Text(text) if text.contains(r#""type":"resize""#) => resizes += 1,
            _ => {}
        }
    }
    panic!("socket ended before the marker");
}

/// A keystroke whose echo is unique to `round`: `cat` echoes it back.
fn keystroke(round: usize) -> Vec<u8> {
    format!("k{round:05}\r").into_bytes()
}

/// One flood: (time from the last frame written to the echo, resizes).
async fn flood(socket: &mut Socket, resizes: u16, round: usize) -> (Duration, usize) {
    for n in 0..resizes {
        let frame = format!(
            r#"{{"type":"resize","cols":{},"rows":{}}}"#,
            81 + n % 40,
            25 + n % 2
        );
        socket
            .feed(Message::Text(frame.into()))
            .await
            .expect("resize");
    }
    let key = keystroke(round);
    socket
        .feed(Message::Binary(key.clone().into()))
        .await
        .expect("key");
    socket.flush().await.expect("flush");
    let written = Instant::now();
    let seen = until_echo(socket, &key[..6]).await;
    (written.elapsed(), seen)
}

/// `resizes` pipelined `resize-window` commands through one raw `tmux -C`
/// client, to the last reply.
async fn raw_tmux(resizes: u16) -> Duration {
    let dir = tempfile::Builder::new()
        .prefix("tmuxeng")
        .tempdir_in("/tmp")
        .expect("temp dir");
    let socket = dir.path().join("raw.sock");
    let socket = socket.to_str().expect("utf-8 path");
    let status = Command::new("tmux")
        .args(["-S", socket])
        .args(common::raw_session_args("/dev/null", &["cat"]))
        .status()
        .expect("tmux");
    assert!(status.success());
    let (_child, mut stdin, mut lines) = common::raw_control_client(socket);
    let mut commands = String::new();
    for n in 0..resizes {
        commands.push_str(&format!(
            "resize-window -t %0 -x {} -y {}\n",
            81 + n % 40,
            25 + n % 2
        ));
    }
    let started = Instant::now();
    stdin
        .write_all(commands.as_bytes())
        .await
        .expect("commands");
    let mut answered = 0;
    while answered < resizes {
        let line = lines.next_line().await.expect("read").expect("a line");
        // Our replies only (flags 1); the attach's own block is flags 0.
        if (line.starts_with("%end ") || line.starts_with("%error ")) && line.ends_with(" 1") {
            answered += 1;
        }
    }
    let took = started.elapsed();
    let _ = Command::new("tmux")
        .args(["-S", socket, "kill-server"])
        .status();
    took
}

#[tokio::main]
async fn main() {
    let resizes: u16 = env_or("BENCH_RESIZES", 10_000);
    let rounds: usize = env_or("BENCH_ROUNDS", 5);
    let serve = Serve::start(&[]);
    let id = serve.spawn(&["cat"]).await;
    let mut socket = serve.ws(&id).await;
    // Attached (hello, snapshot) and the echo path warm.
    let warm = keystroke(99_999);
    socket
        .send(Message::Binary(warm.clone().into()))
        .await
        .expect("key");
    until_echo(&mut socket, &warm[..6]).await;

    let mut settled = Vec::new();
    let mut applied = Vec::new();
    let mut floor = Vec::new();
    for round in 0..rounds {
        let (took, seen) = flood(&mut socket, resizes, round).await;
        settled.push(took);
        applied.push(seen);
        let (took, _) = flood(&mut socket, 0, 50_000 + round).await;
        floor.push(took);
    }
    let raw = raw_tmux(resizes).await;
    applied.sort_unstable();
    println!(
        "resize flood of {resizes} frames, median of {rounds}: settled {} after the last frame \
         (goal <= 1 s; keystroke echo alone {}), the terminal resized {} times (median; one per \
         frame would be {resizes}); raw tmux applying every one: {} for {resizes} pipelined \
         resize-window commands -> settle / raw {:.3}",
        ms(median(settled.clone())),
        ms(median(floor)),
        applied[applied.len() / 2],
        ms(raw),
        median(settled).as_secs_f64() / raw.as_secs_f64()
    );
}
