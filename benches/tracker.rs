//! The command tracker's cost on the data path (issue 43): every byte a
//! terminal prints passes `Tracker::feed` in `Stream::push`, so its cost
//! per byte is measured on 64 MiB of plain output (colours, `\r\n`, no
//! marks) and of marks-dense output (a whole prompt and command every
//! ~120 bytes: far denser than any shell), fed in 4 KiB chunks as pty
//! reads come, beside a `memchr` scan of the same bytes for ESC (the
//! floor any reader of escape sequences pays).
//!
//! Run with `cargo bench --bench tracker`.

use std::hint::black_box;
use std::time::{Duration, Instant, SystemTime};

use tmux_engine::shell::tracker::Tracker;

const STREAM_BYTES: usize = 64 << 20;
const CHUNK: usize = 4096;
const ITERATIONS: usize = 5;

fn plain() -> Vec<u8> {
    let line =
        b"\x1b[32mcompiling\x1b[0m tmux-engine v0.1.0 (/work/src) target/debug/deps 12345\r\n";
    line.iter().copied().cycle().take(STREAM_BYTES).collect()
}

fn marks_dense() -> Vec<u8> {
    let mut out = Vec::with_capacity(STREAM_BYTES + 256);
    let mut n = 0u64;
    while out.len() < STREAM_BYTES {
        out.extend_from_slice(
            b"\x1b]133;D;0\x07\x1b]7;file:///work\x07\x1b]133;A\x07user@host:/work$ \x1b]133;B\x07",
        );
        out.extend_from_slice(format!("echo {n}\r\n\x1b]133;C\x07{n}\r\n").as_bytes());
        n += 1;
    }
    out.truncate(STREAM_BYTES);
    out
}

fn feed(bytes: &[u8]) -> Duration {
    let mut tracker = Tracker::new(false);
    let time = SystemTime::now();
    let began = Instant::now();
    for (index, chunk) in bytes.chunks(CHUNK).enumerate() {
        tracker.feed(chunk, (index * CHUNK) as u64, time);
    }
    let took = began.elapsed();
    black_box(tracker.spans().len());
    took
}

fn floor(bytes: &[u8]) -> Duration {
    let began = Instant::now();
    let mut found = 0usize;
    for chunk in bytes.chunks(CHUNK) {
        found += memchr::memchr_iter(0x1b, chunk).count();
    }
    black_box(found);
    began.elapsed()
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn report(name: &str, bytes: &[u8]) {
    let tracked = median((0..ITERATIONS).map(|_| feed(bytes)).collect());
    let scanned = median((0..ITERATIONS).map(|_| floor(bytes)).collect());
    let mib = bytes.len() as f64 / f64::from(1 << 20);
    println!(
        "{name}: tracker {:.0} MiB/s ({:.2} ns/byte), memchr ESC floor {:.0} MiB/s",
        mib / tracked.as_secs_f64(),
        tracked.as_secs_f64() * 1e9 / bytes.len() as f64,
        mib / scanned.as_secs_f64(),
    );
}

fn main() {
    report("plain 64 MiB", &plain());
    report("marks-dense 64 MiB", &marks_dense());
}
