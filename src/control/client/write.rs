//! Typing into a pane: one write of any size becomes a stream of commands,
//! built piece by piece as tmux answers, never all at once.
//!
//! What the commands are is `tmux::input`'s business (short writes are one
//! `send-keys -H`, longer ones [`PASTE_CHUNK`] pieces through a file and a
//! named buffer); this file runs them:
//!
//! - **Memory is O(piece).** A piece's command and file are made only when
//!   fewer than [`MAX_PIECES_IN_FLIGHT`] pieces of the write are
//!   unanswered; a file is removed once tmux answered its piece.
//! - **Other commands interleave.** The client's FIFO holds at most that
//!   many pieces of a write, so a capture, a snapshot or a liveness probe
//!   sent meanwhile waits for those few pieces, not for the whole paste.
//! - **Writes never mix.** Each write holds the client's input lock (a
//!   `tokio::sync::Mutex`, FIFO-fair) from its first piece to its last
//!   reply: a second paste waits its turn, whole. The waiting queue is
//!   bounded by the callers, each waiting with its own bytes: a bridge
//!   viewer has at most two inputs in flight (it looks at the last one's
//!   answer once the next is queued: [`ControlClient::send_bytes_queued`]),
//!   an HTTP or MCP send is one request (and the registry runs one send per
//!   terminal at a time), so at most one write per connection waits.
//! - **A lost server fails the write** with `SERVER_GONE` (the replies it
//!   waits for fail when the connection closes) and every write still
//!   queued behind it fails the same way as soon as it gets the lock.
//!
//! A write that is dropped part way (its caller gave up) or whose piece
//! fails stops typing after the pieces already sent (tmux runs what it was
//! given: at most three more pieces); its files are removed.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, oneshot};

use super::shared::{Answer, Overdue};
use super::typist::{PieceFile, Typist};
use super::{ClientShared, ControlClient};
use crate::control::PaneId;
use crate::tmux::input::{Piece, keys_line, load_buffer, paste_buffer_exact, pieces};
use crate::{Error, Result};

#[cfg(doc)]
use crate::tmux::input::PASTE_CHUNK;

/// Pieces of one write sent and not yet answered: enough that tmux always
/// has the next piece queued (`cargo bench --bench paste`: 2 reached 0.7x
/// of a raw client sending every piece at once, 4 about 1x), few enough
/// that a command sent during a paste waits behind at most 4 x 64 KiB, a
/// few milliseconds.
pub const MAX_PIECES_IN_FLIGHT: usize = 4;

/// A piece sent to tmux: the replies it waits for, in order.
struct Sent {
    replies: Vec<(String, oneshot::Receiver<Answer>)>,
    _file: Option<PieceFile>,
}

impl ControlClient {
    /// Writes `bytes` to the pane's program exactly (NUL, invalid UTF-8,
    /// LF and CR as they are, no bracketed-paste markers), as a stream of
    /// pieces (see this module's docs): after any write already under way
    /// on this client, never interleaved with it.
    ///
    /// # Errors
    /// `SERVER_GONE` when the connection closes first, `UNRESPONSIVE` when
    /// a piece is unanswered past the command timeout, `COMMAND_FAILED`
    /// when tmux refuses one, `IO` when a piece cannot be written to its
    /// file; the first failing piece is reported.
    pub async fn send_bytes(&self, pane: PaneId, bytes: &[u8]) -> Result<()> {
        let mut typist = self.shared.input.lock().await;
        self.write_locked(&mut typist, pane, bytes).await
    }

    /// [`send_bytes`](Self::send_bytes) unless `stop` resolves before the
    /// writes ahead of it are done: `Ok(false)` then, and no byte of
    /// `bytes` is ever written. Once it starts, the write runs to its end
    /// whatever `stop` does (half a line typed is worse than a late one),
    /// so a caller must not drop this future itself.
    ///
    /// # Errors
    /// As [`send_bytes`](Self::send_bytes).
    pub async fn send_bytes_unless(
        &self,
        pane: PaneId,
        bytes: &[u8],
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<bool> {
        let mut typist = tokio::select! {
            biased;
            () = stop => return Ok(false),
            typist = self.shared.input.lock() => typist,
        };
        self.write_locked(&mut typist, pane, bytes).await?;
        Ok(true)
    }

    /// [`send_bytes`](Self::send_bytes), returning once the write is
    /// queued when it is one `send-keys` line (up to 64 bytes: a keystroke,
    /// a short burst), with its answer still to come: tmux's answer wakes
    /// no one, and whoever holds the [`Queued`] looks at it when it next
    /// needs to (a viewer, with its next input). A longer write is
    /// waited for whole here, as `send_bytes` does.
    ///
    /// Why: a viewer that waited for each keystroke's answer was woken by
    /// it, a task's turn on every echo's way while tmux still echoed (the
    /// bench's `replied` hop), and the reply watchdog armed and dropped its
    /// timer for it, two more. The order is the input lock's and the FIFO's
    /// as before: the line is queued after any write under way, and the
    /// lock is let go once it is queued, not once it is answered (tmux runs
    /// the lines in the order they came).
    ///
    /// # Errors
    /// `SERVER_GONE` when the connection closed before the line was queued;
    /// a longer write's errors as [`send_bytes`](Self::send_bytes).
    pub async fn send_bytes_queued(&self, pane: PaneId, bytes: &[u8]) -> Result<Queued> {
        let mut split = pieces(bytes, 0);
        let (Some(Piece::Keys(keys)), None) = (split.next(), split.next()) else {
            self.send_bytes(pane, bytes).await?;
            return Ok(Queued(None));
        };
        let line = keys_line(pane, keys);
        let _typist = self.shared.input.lock().await;
        let permit = self.in_flight_slot().await;
        let mut state = self.shared.lock();
        if state.closed.is_some() {
            drop(state);
            return Err(self.gone_error());
        }
        let deadline = tokio::time::Instant::now() + self.shared.opts.command_timeout;
        let answer = self
            .shared
            .queue_locked(&mut state, &line, (deadline, permit));
        Ok(Queued(Some(Awaited {
            command: line,
            answer,
            shared: Arc::clone(&self.shared),
        })))
    }

    /// An in-flight slot for one line, waited for when all are taken;
    /// `None` once the semaphore closed (the connection ended).
    async fn in_flight_slot(&self) -> Option<OwnedSemaphorePermit> {
        match self.shared.in_flight.clone().try_acquire_owned() {
            Ok(permit) => Some(permit),
            Err(_) => self.shared.in_flight.clone().acquire_owned().await.ok(),
        }
    }

    /// The write itself, with the input lock held.
    async fn write_locked(&self, typist: &mut Typist, pane: PaneId, bytes: &[u8]) -> Result<()> {
        let mut in_flight = VecDeque::with_capacity(MAX_PIECES_IN_FLIGHT);
        for piece in pieces(bytes, 0) {
            if in_flight.len() == MAX_PIECES_IN_FLIGHT
                && let Some(sent) = in_flight.pop_front()
            {
                self.settle(sent).await?;
            }
            in_flight.push_back(self.send_piece(typist, pane, piece).await?);
        }
        while let Some(sent) = in_flight.pop_front() {
            self.settle(sent).await?;
        }
        Ok(())
    }

    /// Queues one piece's commands, back to back, each holding an
    /// in-flight slot like any caller's command.
    async fn send_piece(
        &self,
        typist: &mut Typist,
        pane: PaneId,
        piece: Piece<'_>,
    ) -> Result<Sent> {
        // Each command line, and whether it is a guard answering in two
        // blocks (see `paste_buffer_exact`).
        let (commands, file) = match piece {
            Piece::Keys(bytes) => (vec![(keys_line(pane, bytes), false)], None),
            Piece::Paste(bytes) => {
                let file = typist.write_file(bytes).map_err(|e| self.unless_gone(e))?;
                let commands = vec![
                    (load_buffer(&typist.buffer, &file.0).into_line(), false),
                    (paste_buffer_exact(pane, &typist.buffer).into_line(), true),
                ];
                (commands, Some(file))
            }
        };
        let mut permits = Vec::with_capacity(commands.len());
        for _ in &commands {
            permits.push(self.in_flight_slot().await);
        }
        let mut replies = Vec::with_capacity(commands.len());
        let mut state = self.shared.lock();
        if state.closed.is_some() {
            drop(state);
            return Err(self.gone_error());
        }
        let deadline = tokio::time::Instant::now() + self.shared.opts.command_timeout;
        for ((line, guarded), permit) in commands.into_iter().zip(permits) {
            let answer = self
                .shared
                .call_locked(&mut state, &line, deadline, permit, guarded);
            replies.push((line, answer));
        }
        Ok(Sent {
            replies,
            _file: file,
        })
    }

    /// Waits for a piece's replies; its file goes once they are in.
    async fn settle(&self, sent: Sent) -> Result<()> {
        for (command, answer) in sent.replies {
            judge(&self.shared, command, answer.await)?;
        }
        Ok(())
    }

    /// `SERVER_GONE` for a failure that came from the connection closing
    /// (a killed server's directory goes with it), `error` otherwise.
    fn unless_gone(&self, error: Error) -> Error {
        if self.closed_reason().is_some() {
            self.gone_error()
        } else {
            error
        }
    }
}

/// A write queued to tmux by [`ControlClient::send_bytes_queued`], its
/// answer still to come. Dropping it drops the answer, never the write.
#[must_use = "a refusal is only known by looking at the answer"]
pub struct Queued(Option<Awaited>);

struct Awaited {
    command: String,
    answer: oneshot::Receiver<Answer>,
    shared: Arc<ClientShared>,
}

impl Queued {
    /// tmux's answer: at once when it came already (no timer, no wake-up
    /// then), else within the client's command timeout.
    ///
    /// # Errors
    /// `COMMAND_FAILED` when tmux refused the line, `UNRESPONSIVE` when it
    /// did not answer within the command timeout, `SERVER_GONE` when the
    /// connection closed first.
    pub async fn answered(self) -> Result<()> {
        let Some(Awaited {
            command,
            answer,
            shared,
        }) = self.0
        else {
            return Ok(());
        };
        let timeout = shared.opts.command_timeout;
        // `timeout` polls the answer first and arms its timer only when
        // the answer has not come yet.
        match tokio::time::timeout(timeout, answer).await {
            Ok(answer) => judge(&shared, command, answer),
            Err(_) => Err(Error::Unresponsive { command, timeout }),
        }
    }
}

impl std::fmt::Debug for Queued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Queued")
            .field(&self.0.as_ref().map(|awaited| &awaited.command))
            .finish()
    }
}

/// What the answer to `command` means for its caller.
fn judge(
    shared: &ClientShared,
    command: String,
    answer: std::result::Result<Answer, oneshot::error::RecvError>,
) -> Result<()> {
    match answer {
        Ok(Ok(reply)) if reply.ok => Ok(()),
        Ok(Ok(reply)) => Err(Error::Command {
            command,
            message: reply.text(),
        }),
        Ok(Err(Overdue(timeout))) => Err(Error::Unresponsive { command, timeout }),
        Err(_) => Err(super::gone_error(shared)),
    }
}
