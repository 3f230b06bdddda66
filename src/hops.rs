//! Per-hop timestamps of a keystroke's way to its echo (for the latency
//! bench, to say which hop costs what): the WebSocket frame in, the input
//! line written to tmux, tmux's
//! reply, the raw reader's read (the PTY transport: the attach pty's
//! write and read), the stream's push, the hub's fan-out, the
//! viewer's queue and the frame out.
//!
//! Off unless `TMUX_ENGINE_HOPS` names a file when the first hop is
//! marked: then every echo appends one line to it, each hop's time in
//! nanoseconds after the frame came in (`ws_in=0 written=... ws_out=...`,
//! 0 for a hop not passed), and the frame in's own time on `CLOCK_MONOTONIC`
//! (`clock=`), so a client timing the echo on this machine can say how
//! long its frame took to reach serve and the echo to reach it. Off, a
//! mark is one atomic load and a branch, so the probes stay in the hot
//! path. One keystroke at a time is what it measures (the bench waits for
//! each echo): a hop keeps the first time it was passed after the last
//! frame in, so output between two keystrokes overwrites nothing.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// A point on the echo path, in the order a keystroke passes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hop {
    /// The viewer's binary frame was read by its WebSocket pump.
    WsIn,
    /// The input's command line was queued for the control client's writer.
    Queued,
    /// The input's command line was written to `tmux -C`'s stdin (the
    /// PTY transport: the bytes were written to the attach pty).
    Written,
    /// The raw reader read the echo from tmux's pipe socket.
    RawRead,
    /// The PTY transport read the echo from the attach pty.
    PtyRead,
    /// The backend pushed it into the terminal's stream.
    Stream,
    /// The hub queued it for the viewer.
    Hub,
    /// The WebSocket pump took it from the viewer's queue.
    WsEvent,
    /// tmux's answer to a caller's command (the input's, on the bench)
    /// reached the control client's reader; the pump looks at it only
    /// with its next input.
    Replied,
    /// The frame was flushed to the socket.
    WsOut,
}

const HOPS: [(Hop, &str); 10] = [
    (Hop::WsIn, "ws_in"),
    (Hop::Queued, "queued"),
    (Hop::Written, "written"),
    (Hop::RawRead, "raw_read"),
    (Hop::PtyRead, "pty_read"),
    (Hop::Stream, "stream"),
    (Hop::Hub, "hub"),
    (Hop::WsEvent, "ws_event"),
    (Hop::Replied, "replied"),
    (Hop::WsOut, "ws_out"),
];

struct Probe {
    base: Instant,
    /// `base` on `CLOCK_MONOTONIC`, in nanoseconds: each line gives its
    /// frame in on the clock a client on this machine reads too, so the
    /// bench can tell its own send and receive from serve's hops.
    base_clock: u64,
    /// Nanoseconds since `base` (+1, so 0 means not passed), per hop.
    at: [AtomicU64; HOPS.len()],
    log: Mutex<std::fs::File>,
}

static PROBE: OnceLock<Option<Probe>> = OnceLock::new();

fn probe() -> Option<&'static Probe> {
    PROBE
        .get_or_init(|| {
            let path = std::env::var_os("TMUX_ENGINE_HOPS")?;
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .ok()?;
            let clock = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
            let base = Instant::now();
            let base_clock = u64::try_from(clock.tv_sec).unwrap_or(0) * 1_000_000_000
                + u64::try_from(clock.tv_nsec).unwrap_or(0);
            Some(Probe {
                base,
                base_clock,
                at: Default::default(),
                log: Mutex::new(log),
            })
        })
        .as_ref()
}

fn index(hop: Hop) -> usize {
    HOPS.iter().position(|(h, _)| *h == hop).unwrap_or(0)
}

/// Notes that a keystroke passed `hop` now (the first pass since the last
/// [`Hop::WsIn`] counts); a frame in starts a new keystroke.
pub(crate) fn mark(hop: Hop) {
    let Some(probe) = probe() else { return };
    let now = u64::try_from(probe.base.elapsed().as_nanos()).unwrap_or(u64::MAX) + 1;
    if hop == Hop::WsIn {
        for slot in &probe.at {
            slot.store(0, Ordering::Relaxed);
        }
        probe.at[0].store(now, Ordering::Relaxed);
        return;
    }
    let _ = probe.at[index(hop)].compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
}

/// Ends a keystroke at the frame out: appends its line, once.
pub(crate) fn finish() {
    let Some(probe) = probe() else { return };
    mark(Hop::WsOut);
    let start = probe.at[0].swap(0, Ordering::Relaxed);
    if start == 0 {
        return;
    }
    let mut line = String::new();
    for (i, (_, name)) in HOPS.iter().enumerate() {
        let at = probe.at[i].load(Ordering::Relaxed);
        let since = if i == 0 { 0 } else { at.saturating_sub(start) };
        let since = if at == 0 && i != 0 { 0 } else { since };
        line.push_str(&format!("{name}={since} "));
    }
    line.push_str(&format!("clock={}\n", probe.base_clock + start - 1));
    let mut log = probe.log.lock().unwrap_or_else(|e| e.into_inner());
    let _ = log.write_all(line.as_bytes());
}
