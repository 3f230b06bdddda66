//! `ServerLink`: what a tmux terminal's tasks share: the control client,
//! the server handle, the output ring sends read back, and the status
//! watch.
//!
//! Below `terminal.rs` (the terminal and its watcher), `send.rs` and
//! `pages.rs`, which all use it; it uses none of them.

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use bytes::Bytes;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::debug;

use super::TmuxConfig;
use crate::Result;
use crate::control::PaneId;
use crate::control::client::{ControlClient, PaneStream};
use crate::registry::seam::TerminalStatus;
use crate::registry::{SpawnSpec, TerminalId};
use crate::tmux::command::TmuxCommand;
use crate::tmux::{ProcessId, ServerHandle};

/// What changes while the terminal runs, behind a std mutex (never held
/// across an await).
pub(super) struct Mutable {
    /// The most recent output, at most `config.output_buffer` bytes.
    pub ring: OutputRing,
    /// Times output was skipped (a resync replaced it).
    pub gaps: u64,
    /// The pane's process, with its start time (the kill path's guard
    /// against a recycled pid); `None` when not known.
    pub pane_process: Option<ProcessId>,
    /// The send in flight, so `close` can end it.
    pub active_send: Option<CancellationToken>,
}

/// Everything the terminal's tasks share.
pub(super) struct ServerLink {
    pub id: TerminalId,
    /// The epoch of this link's output offsets (issue 17's cursors): new
    /// per link, so an offset of an earlier one is never taken for ours.
    pub epoch: u64,
    pub spec: SpawnSpec,
    pub config: Arc<TmuxConfig>,
    pub client: ControlClient,
    pub pane: PaneId,
    /// Serializes `close` (and knows the server's pid and directory).
    pub server: tokio::sync::Mutex<ServerHandle>,
    /// The same server, never locked: what `attach_command` and the
    /// locator name.
    pub address: ServerHandle,
    pub mutable: Mutex<Mutable>,
    /// The output byte count, bumped on every chunk: waiters watch it.
    pub output: watch::Sender<u64>,
    pub status: watch::Sender<TerminalStatus>,
    /// New pane streams after a respawn, for the watcher.
    pub restream: mpsc::Sender<PaneStream>,
    /// Stops the watcher (drop, close or shutdown).
    pub stop: CancellationToken,
    /// The watcher task (closed once it is spawned).
    pub tasks: TaskTracker,
    pub closed: AtomicBool,
}

impl ServerLink {
    pub(super) fn lock(&self) -> MutexGuard<'_, Mutable> {
        self.mutable.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets the status, waking watchers only when it changed.
    pub(super) fn set_status(&self, status: TerminalStatus) {
        self.status.send_if_modified(|current| {
            if *current == status {
                false
            } else {
                debug!(terminal = %self.id, %status, "status changed");
                *current = status;
                true
            }
        });
    }

    pub(super) fn push_output(&self, bytes: Bytes) {
        let total = {
            let mut mutable = self.lock();
            mutable.ring.push(bytes, self.config.output_buffer);
            mutable.ring.total
        };
        self.output.send_replace(total);
    }

    /// Runs `command` on the terminal's control client.
    pub(super) async fn command(&self, command: &TmuxCommand) -> Result<crate::control::Reply> {
        self.client.command(command).await
    }
}

/// Output bytes from absolute offset `start` to now, and whether some were
/// dropped (older than the ring, or skipped by a resync after `gaps`).
pub(super) fn output_since(shared: &ServerLink, start: u64, gaps: u64) -> (Bytes, bool) {
    let mutable = shared.lock();
    let (bytes, dropped) = mutable.ring.since(start);
    (bytes, dropped || mutable.gaps != gaps)
}

/// The newest output as the chunks it arrived in (shared `Bytes`, never
/// copied in), at most a limit in all. One contiguous buffer of the limit
/// (4 MiB by default) would be allocated whole per busy terminal and, once
/// freed, kept by the allocator; chunks cost only what was output.
#[derive(Debug, Default)]
pub(super) struct OutputRing {
    chunks: VecDeque<Bytes>,
    /// Bytes held in `chunks`.
    len: usize,
    /// Bytes of output seen in all; the ring ends at this offset.
    pub total: u64,
    /// When each held chunk arrived, by the offset it starts at: what a
    /// command's duration is measured from after its send has gone.
    times: VecDeque<(u64, SystemTime)>,
}

impl OutputRing {
    /// Appends `bytes`, then drops the oldest bytes beyond `limit`.
    fn push(&mut self, mut bytes: Bytes, limit: usize) {
        self.times.push_back((self.total, SystemTime::now()));
        self.total += bytes.len() as u64;
        if bytes.len() >= limit {
            self.chunks.clear();
            self.len = 0;
            bytes = bytes.slice(bytes.len() - limit..);
        }
        self.len += bytes.len();
        self.chunks.push_back(bytes);
        while self.len > limit {
            let excess = self.len - limit;
            let front = self
                .chunks
                .front_mut()
                .expect("a ring over its limit holds a chunk");
            if front.len() <= excess {
                self.len -= front.len();
                self.chunks.pop_front();
            } else {
                *front = front.slice(excess..);
                self.len -= excess;
            }
        }
        let start = self.start();
        while self
            .times
            .get(1)
            .is_some_and(|&(offset, _)| offset <= start)
        {
            self.times.pop_front();
        }
    }

    /// When the byte at `offset` arrived, while the ring holds it.
    pub(super) fn time_at(&self, offset: u64) -> Option<SystemTime> {
        if offset < self.start() || offset >= self.total {
            return None;
        }
        let after = self.times.partition_point(|&(start, _)| start <= offset);
        self.times.get(after.checked_sub(1)?).map(|&(_, time)| time)
    }

    /// The offset of the oldest byte held.
    pub(super) fn start(&self) -> u64 {
        self.total - self.len as u64
    }

    /// The bytes from absolute offset `start` to the end, and whether some
    /// from `start` on are no longer held.
    pub(super) fn since(&self, start: u64) -> (Bytes, bool) {
        let ring_start = self.total - self.len as u64;
        let from = start.max(ring_start);
        let mut skip = usize::try_from(from - ring_start).unwrap_or(usize::MAX);
        let mut out = Vec::with_capacity(self.len.saturating_sub(skip));
        for chunk in &self.chunks {
            if skip >= chunk.len() {
                skip -= chunk.len();
                continue;
            }
            out.extend_from_slice(&chunk[skip..]);
            skip = 0;
        }
        (Bytes::from(out), start < ring_start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring_of(chunks: &[&'static [u8]], limit: usize) -> OutputRing {
        let mut ring = OutputRing::default();
        for chunk in chunks {
            ring.push(Bytes::from_static(chunk), limit);
        }
        ring
    }

    #[test]
    fn keeps_the_newest_bytes_by_offset() {
        let ring = ring_of(&[b"abc", b"defg", b"hi"], 5);
        assert_eq!(ring.total, 9);
        assert_eq!(ring.since(0), (Bytes::from_static(b"efghi"), true));
        assert_eq!(ring.since(4), (Bytes::from_static(b"efghi"), false));
        assert_eq!(ring.since(6), (Bytes::from_static(b"ghi"), false));
        assert_eq!(ring.since(7), (Bytes::from_static(b"hi"), false));
        assert_eq!(ring.since(9), (Bytes::new(), false));
        // An offset past the end (a caller's stale count) yields nothing.
        assert_eq!(ring.since(12), (Bytes::new(), false));
    }

    #[test]
    fn a_chunk_larger_than_the_limit_keeps_its_tail_and_counts_whole() {
        let ring = ring_of(&[b"ab", b"0123456789"], 4);
        assert_eq!(ring.total, 12);
        assert_eq!(ring.len, 4);
        assert_eq!(ring.since(8), (Bytes::from_static(b"6789"), false));
        assert_eq!(ring.since(2), (Bytes::from_static(b"6789"), true));
    }

    #[test]
    fn exact_fits_drop_nothing() {
        let ring = ring_of(&[b"ab", b"cd"], 4);
        assert_eq!(ring.since(0), (Bytes::from_static(b"abcd"), false));
        assert_eq!(ring.chunks.len(), 2);
    }

    #[test]
    fn knows_when_each_held_byte_arrived() {
        let ring = ring_of(&[b"abc", b"defg", b"hi"], 5);
        assert!(ring.time_at(3).is_none(), "evicted");
        assert!(ring.time_at(9).is_none(), "not yet output");
        assert!(
            ring.time_at(4)
                .is_some_and(|four| ring.time_at(8) >= Some(four))
        );
        assert_eq!(ring.times.len(), 2, "the first chunk's time went with it");
    }
}
