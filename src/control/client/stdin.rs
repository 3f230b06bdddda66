//! tmux's stdin: every command line goes out in the order it was queued,
//! written by its caller when nothing is waiting to be written, else by
//! the writer task behind what is.
//!
//! Why not always the task: a keystroke's line waited for the writer task
//! to be scheduled (the per-hop latency bench: 45 µs on a quiet machine,
//! 280 µs under load) before its one `write`. So a line queued while the
//! writer is idle is written at once with a non-blocking `write(2)` under
//! the client's state lock (where the line's pending entry is pushed, so
//! FIFO order stays write order); whatever the pipe does not take (it is
//! full: tmux is not reading) goes to the writer task, which is busy from
//! then until its queue is empty again, and every line queued meanwhile
//! follows it there. Only the writer goes idle, under the same lock, so a
//! direct write can never pass a queued line.
//!
//! Nothing is written before the attach command's block closed (tmux
//! 3.3a reads stdin before it has run): the pipe is handed over only when
//! the writer starts. Closing it is EOF, which detaches: on hangup the
//! writer takes the client's copy away and drops its own.
//!
//! This file is the rule: [`Stdin`] and the three moves of its state, each
//! made under the client's state lock. The writer task that makes the
//! writer's moves is `writer.rs`.

use std::io::IoSlice;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::transport::Sink;

use crate::hops::{Hop, mark};

/// The writing side of tmux's stdin, kept in the client's state.
pub(super) struct Stdin {
    /// Set once the writer started; taken away when it ends.
    pipe: Option<Arc<Sink>>,
    /// The writer task has lines to write (or has not started): a line
    /// queued now must go behind them.
    busy: bool,
    /// Lines for the writer task. Unbounded on purpose: lines are queued
    /// under the state lock (FIFO order = write order), where a bounded
    /// `send().await` cannot wait. It is bounded in practice: caller lines
    /// hold an in-flight permit until tmux answers them (at most
    /// `max_in_flight`, whether or not the caller still waits), and the
    /// engine's own lines are at most three per `subscribe_pane` or
    /// dropped stream, and one plus two per subscriber per tmux `%pause`
    /// or lag episode (a pane is paused once until continued, a subscriber
    /// lags once until resynced).
    queue: mpsc::UnboundedSender<Bytes>,
}

impl Stdin {
    /// A stdin whose lines wait in `queue` until the writer starts.
    pub(super) fn new(queue: mpsc::UnboundedSender<Bytes>) -> Stdin {
        Stdin {
            pipe: None,
            busy: true,
            queue,
        }
    }

    /// Writes `line` and its newline now if nothing is queued ahead of it,
    /// else queues it (or its unwritten rest). False once the writer has
    /// ended: the line will never be written.
    pub(super) fn write(&mut self, line: &str) -> bool {
        mark(Hop::Queued);
        let line = line.as_bytes();
        let mut written = 0;
        if !self.busy
            && let Some(pipe) = &self.pipe
        {
            let parts = [IoSlice::new(line), IoSlice::new(b"\n")];
            // An error (WouldBlock: the pipe is full; or a closed pipe,
            // which the writer finds too) leaves the whole line queued.
            written = pipe.try_write_vectored(&parts).unwrap_or(0);
            if written == line.len() + 1 {
                mark(Hop::Written);
                return true;
            }
        }
        let mut rest = Vec::with_capacity(line.len() + 1 - written);
        rest.extend_from_slice(line.get(written..).unwrap_or_default());
        if written <= line.len() {
            rest.push(b'\n');
        }
        self.busy = true;
        self.queue.send(Bytes::from(rest)).is_ok()
    }

    /// The writer started with `pipe`: lines are written directly once it
    /// has caught up with those queued before.
    pub(super) fn started(&mut self, pipe: Arc<Sink>) {
        self.pipe = Some(pipe);
    }

    /// The writer wrote what it had: the next queued line for it to
    /// write, else it goes idle and direct writes may begin. Called only
    /// by the writer, under the state lock (where every line is queued),
    /// so no line can be queued between the look and going idle.
    pub(super) fn next_or_idle(
        &mut self,
        lines: &mut mpsc::UnboundedReceiver<Bytes>,
    ) -> Option<Bytes> {
        match lines.try_recv() {
            Ok(line) => Some(line),
            Err(_) => {
                self.busy = false;
                None
            }
        }
    }

    /// The writer of `pipe` ended: no more direct writes, and the lines
    /// queued from now on are never written. A stdin of a later connection
    /// (`linger.rs` swaps it in when it lets the connection go) is not
    /// `pipe`'s, and stays as it is.
    pub(super) fn hang_up(&mut self, pipe: &Arc<Sink>) {
        if self
            .pipe
            .as_ref()
            .is_some_and(|mine| Arc::ptr_eq(mine, pipe))
        {
            self.pipe = None;
            self.busy = true;
        }
    }

    /// Whether nothing is queued or being written: a line queued now would
    /// be written at once.
    pub(super) fn idle(&self) -> bool {
        !self.busy && self.pipe.is_some()
    }
}
