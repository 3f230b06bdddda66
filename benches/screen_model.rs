//! What the screen model costs (issue 45): bytes per second fed to the
//! emulator in 4 KiB reads (what a pane's output events are) and the heap
//! one screen holds, beside tmux's own parse of the same bytes (a detached
//! pane `cat`s the file, timed from one `wait-for` signal to another,
//! minus an empty file's run).
//!
//! Two payloads of `BENCH_MB` MiB (default 64): log text (the throughput
//! benches' line: tabs, SGR, UTF-8) and a full-screen redraw (cursor moves,
//! 256 and 24-bit colour, wide characters, erases).
//!
//! `cargo bench --bench screen_model` (env `BENCH_MB`, `BENCH_ROUNDS`
//! default 3).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{env_or, make_payload, median};
use tmux_engine::screen::Emulator;
use tmux_engine::vocab::Size;

/// The system allocator, counting bytes live.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn tui_payload(mb: usize) -> Vec<u8> {
    let mut frame = Vec::new();
    for row in 1..=24u32 {
        frame.extend_from_slice(
            format!(
                "\x1b[{row};1H\x1b[38;5;{}m{row:>3} \x1b[48;2;{};40;60m\u{4e2d}\u{6587} status \x1b[1mbold\x1b[m text \x1b[K",
                row * 7 % 256,
                row * 10 % 256
            )
            .as_bytes(),
        );
    }
    frame.extend_from_slice(b"\x1b[H\x1b[2J");
    let mut out = Vec::with_capacity(mb << 20);
    while out.len() < mb << 20 {
        out.extend_from_slice(&frame);
    }
    out
}

fn feed(bytes: &[u8], scrollback: usize) -> Duration {
    let mut emulator = Emulator::new(Size { cols: 80, rows: 24 }, scrollback);
    let start = Instant::now();
    for chunk in bytes.chunks(4096) {
        emulator.process(chunk);
    }
    let took = start.elapsed();
    std::hint::black_box(emulator.screen());
    took
}

/// Seconds tmux takes to read `file` into a detached pane, from the
/// signal that starts the pane's `cat` to the one it sends when done.
fn tmux_parse(dir: &std::path::Path, file: &std::path::Path) -> Duration {
    // A socket of its own per run: `kill-server` returns before the old
    // server has gone, and a `new-session` on its socket then reached the
    // dying server ("server exited unexpectedly").
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let socket = dir.join(format!("sock{}", RUNS.fetch_add(1, Ordering::Relaxed)));
    let socket = socket.to_str().unwrap();
    // The pane waits for `go` before it reads the file, and stays (its
    // server with it) until the kill below: tmux 3.3a's server crashed
    // (SIGSEGV, "server exited unexpectedly") when the flood began while
    // it was still creating the session, and a pane that ended at once
    // took the server with it before the wait-for below connected.
    let script = format!(
        "tmux wait-for go; cat {}; tmux wait-for -S parsed; exec sleep 600",
        file.display()
    );
    let tmux = |args: &[&str]| {
        let status = std::process::Command::new("tmux")
            .args(["-S", socket])
            .args(args)
            .status()
            .unwrap();
        assert!(status.success(), "tmux {args:?}");
    };
    tmux(&common::raw_session_args(
        "/dev/null",
        &["sh", "-c", &script],
    ));
    let start = Instant::now();
    tmux(&["wait-for", "-S", "go"]);
    tmux(&["wait-for", "parsed"]);
    let took = start.elapsed();
    tmux(&["kill-server"]);
    took
}

fn mbps(bytes: usize, took: Duration) -> f64 {
    bytes as f64 / took.as_secs_f64() / 1e6
}

fn main() {
    let mb: usize = env_or("BENCH_MB", 64);
    let rounds: usize = env_or("BENCH_ROUNDS", 3);
    let dir = tempfile::tempdir().unwrap();
    let log_file = dir.path().join("log");
    make_payload(&log_file, mb);
    let log = std::fs::read(&log_file).unwrap();
    let tui = tui_payload(mb);
    let tui_file = dir.path().join("tui");
    std::fs::write(&tui_file, &tui).unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();

    for (name, bytes, file) in [
        ("log text", &log, &log_file),
        ("full-screen", &tui, &tui_file),
    ] {
        let model = median((0..rounds).map(|_| feed(bytes, 1000)).collect());
        let tmux = median(
            (0..rounds)
                .map(|_| {
                    tmux_parse(dir.path(), file).saturating_sub(tmux_parse(dir.path(), &empty))
                })
                .collect(),
        );
        println!(
            "{name:12} {} MiB: model {:.1} MB/s, tmux {:.1} MB/s, ratio {:.2}",
            bytes.len() >> 20,
            mbps(bytes.len(), model),
            mbps(bytes.len(), tmux),
            tmux.as_secs_f64() / model.as_secs_f64()
        );
    }

    for (cols, rows, fill) in [(80u16, 24u16, 0usize), (80, 24, 1000), (200, 50, 0)] {
        let before = LIVE.load(Ordering::Relaxed);
        let mut emulator = Emulator::new(Size { cols, rows }, 1000);
        for i in 0..fill + usize::from(rows) {
            emulator.process(format!("line {i} of the scrollback\r\n").as_bytes());
        }
        let held = LIVE.load(Ordering::Relaxed) - before;
        println!(
            "memory: {cols}x{rows} screen, {fill} scrollback lines: {} KiB",
            held / 1024
        );
        drop(emulator);
    }
}
