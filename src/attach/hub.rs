//! The control transport's fan-out as a state machine with no IO: how far
//! one terminal's [`Stream`] was fanned out, and its viewers' queues.
//!
//! The caller (`feed.rs`) wakes it on the stream's changes and feeds every
//! other event in; the machine reads the new chunks from the stream (the
//! registry's, the one that sends and cursor reads read: a viewer's offsets
//! are cursors), pushes the shared `Bytes` into each viewer's bounded queue
//! with `try_send` and returns [`Effect`]s the caller runs outside any lock.
//! It never waits for a viewer: a viewer whose queue is full is marked
//! lagging and skipped; once it has room again it joins the set of viewers
//! waiting for a snapshot, and one capture serves all of them (coalesced).
//! A returning viewer's missed bytes are replayed from the stream's ring.

use bytes::Bytes;
use tokio::sync::mpsc;

use super::ViewerEvent;
use crate::stream::{OutputCursor, Stream};
use crate::vocab::{ExitStatus, Size};

/// How a viewer stands with the live stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Receives every chunk.
    Live,
    /// Its queue was full: skipped until it has room again.
    Lagging,
    /// Has room (or just joined) and waits for the next snapshot.
    Waiting,
}

struct Slot {
    id: u64,
    tx: mpsc::Sender<ViewerEvent>,
    state: State,
}

/// What the machine asks its driver to do.
#[derive(Debug)]
pub(crate) enum Effect {
    /// Wait until viewer `id`'s queue has room, then call
    /// [`Hub::room`].
    WatchRoom(u64, mpsc::Sender<ViewerEvent>),
    /// Capture a snapshot and hand it to [`Hub::snapshot`] with this
    /// epoch; at most one is asked for at a time per epoch.
    Capture(u64),
    /// Deliver this event even if the queue is full (exit statuses), from
    /// a task of its own so nobody waits for the viewer.
    Deliver(mpsc::Sender<ViewerEvent>, ViewerEvent),
    /// The program exited for good while these viewers were not live
    /// (lagging, or waiting for a repaint): capture the final screen once,
    /// then give each a snapshot at `offset` and the exit, in that order,
    /// from a task of its own.
    Farewell {
        /// The viewers that missed bytes.
        viewers: Vec<mpsc::Sender<ViewerEvent>>,
        /// The stream's end: nothing follows.
        offset: u64,
        /// The terminal's size.
        size: Size,
        /// How the program ended.
        exit: ExitStatus,
    },
}

/// One terminal's fan-out state.
pub(crate) struct Hub {
    /// The stream's epoch (a rebuilt terminal brings a new stream).
    stream: u64,
    /// The offset just past the newest byte fanned out.
    end: u64,
    /// The oldest offset a resume may be replayed from: the bytes before
    /// it do not lead up to what the viewers see now (a restart or a skip).
    floor: u64,
    /// The stream's skips seen so far.
    gaps: u64,
    slots: Vec<Slot>,
    capturing: bool,
    /// Bumped by every discontinuity: a capture asked for before it shows
    /// what came before (the old program, a server since killed), so its
    /// answer must not stand in for one of what runs now.
    epoch: u64,
    /// The stream's end when the capture in flight was asked for.
    capture_from: u64,
    /// Captures in a row that output overtook (see [`Hub::snapshot`]).
    overtaken: u32,
    size: Size,
    next_id: u64,
}

/// Captures in a row a snapshot may be retried for because output arrived
/// while it ran; past it the last one is delivered (under a steady flood
/// no capture is ever clean, and the next bytes repaint soon anyway).
const MAX_OVERTAKEN: u32 = 4;

impl Hub {
    /// A hub fanning `stream` out from its end now.
    pub(crate) fn new(stream: &Stream, size: Size) -> Hub {
        let mut hub = Hub {
            stream: 0,
            end: 0,
            floor: 0,
            gaps: 0,
            slots: Vec::new(),
            capturing: false,
            epoch: 0,
            capture_from: 0,
            overtaken: 0,
            size,
            next_id: 0,
        };
        hub.restream(stream);
        hub
    }

    /// Follows `stream` from its end now (the hub's first, or a rebuilt
    /// terminal's); a resume may replay what it holds since its latest
    /// skip (a respawn is one). After a rebuild the caller repaints the
    /// viewers ([`discontinuity`](Self::discontinuity)).
    pub(crate) fn restream(&mut self, stream: &Stream) {
        let held = stream.held();
        self.stream = stream.epoch();
        self.end = held.total;
        self.floor = held.skipped_at;
        self.gaps = held.gaps;
    }

    /// Where the stream stands for the viewers: the next byte fanned out.
    pub(crate) fn cursor(&self) -> OutputCursor {
        OutputCursor {
            epoch: self.stream,
            offset: self.end,
        }
    }

    /// The terminal's current size.
    pub(crate) fn size(&self) -> Size {
        self.size
    }

    /// How many viewers are attached.
    #[cfg(test)]
    pub(crate) fn viewers(&self) -> usize {
        self.slots.len()
    }

    /// Adds a viewer; returns its id. With `since` in this stream, past the
    /// floor and still held, it gets exactly the bytes from there and is
    /// live; otherwise it waits for a snapshot.
    pub(crate) fn join(
        &mut self,
        tx: mpsc::Sender<ViewerEvent>,
        since: Option<OutputCursor>,
        stream: &Stream,
        effects: &mut Vec<Effect>,
    ) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let replay = since
            .filter(|since| since.epoch == self.stream && since.offset >= self.floor)
            .and_then(|since| {
                let bytes = stream.held().between(since.offset, self.end)?;
                Some((since.offset, bytes))
            });
        let state = match replay {
            Some((offset, bytes)) => {
                let sent = bytes.is_empty()
                    || tx
                        .try_send(ViewerEvent::Output {
                            offset: Some(offset),
                            bytes,
                        })
                        .is_ok();
                if sent { State::Live } else { State::Waiting }
            }
            None => State::Waiting,
        };
        self.slots.push(Slot { id, tx, state });
        if state == State::Waiting {
            self.want_capture(effects);
        }
        id
    }

    /// Fans out what `stream` holds past the hub's end. When the stream
    /// skipped output since, or its ring dropped bytes the hub had not yet
    /// fanned out, the viewers cannot be brought up to date byte by byte:
    /// the hub jumps to the end and repaints them.
    pub(crate) fn catch_up(&mut self, stream: &Stream, effects: &mut Vec<Effect>) {
        let chunks = {
            let held = stream.held();
            let skipped = held.gaps != self.gaps;
            self.gaps = held.gaps;
            let chunks = held.chunks(self.end, held.total).filter(|_| !skipped);
            if chunks.is_none() {
                self.end = held.total;
            }
            chunks
        };
        let Some(chunks) = chunks else {
            self.discontinuity(effects);
            return;
        };
        for chunk in chunks {
            self.output(chunk, effects);
        }
    }

    /// Whether `stream` holds bytes the hub has not fanned out.
    pub(crate) fn behind(&self, stream: &Stream) -> bool {
        stream.held().total > self.end
    }

    /// The terminal printed `bytes` (the stream's next chunk).
    fn output(&mut self, bytes: Bytes, effects: &mut Vec<Effect>) {
        let offset = self.end;
        self.end += bytes.len() as u64;
        self.slots.retain_mut(|slot| {
            if slot.state != State::Live {
                return true;
            }
            let event = ViewerEvent::Output {
                offset: Some(offset),
                bytes: bytes.clone(),
            };
            lag_on_full(slot, slot.tx.try_send(event), effects)
        });
    }

    /// Viewer `id` has room in its queue again: it waits for a snapshot.
    pub(crate) fn room(&mut self, id: u64, effects: &mut Vec<Effect>) {
        let Some(slot) = self.slots.iter_mut().find(|slot| slot.id == id) else {
            return;
        };
        if slot.state == State::Lagging {
            slot.state = State::Waiting;
            self.want_capture(effects);
        }
    }

    /// The capture asked for in `epoch` finished (`None`: it failed): every
    /// waiting viewer gets `repaint` tagged with the current offset and goes
    /// live. A capture of an earlier epoch is ignored: the one asked for
    /// since is what they wait for.
    ///
    /// A capture runs beside the output stream, so output that reached the
    /// hub while it ran may be on its screen or not: tagged with the
    /// current offset it could show a screen from before bytes the viewer
    /// then never gets (a command's echo lost for good). Such a capture is
    /// asked for again; only one that no output overtook is exact. Under a
    /// steady flood none is, so after [`MAX_OVERTAKEN`] tries the last one
    /// is tagged with the offset it was asked at and followed by every byte
    /// since: the screen tmux captured is at least that far, so a few bytes
    /// may be drawn twice but none is lost. (Tagged with the offset at its
    /// answer, the bytes between the capture and that offset were lost to
    /// the viewer; when they were a program's last output before it waited,
    /// the viewer never saw them: the stalled-viewer test's `mid-2`.)
    pub(crate) fn snapshot(
        &mut self,
        epoch: u64,
        repaint: Option<Bytes>,
        stream: &Stream,
        effects: &mut Vec<Effect>,
    ) {
        if epoch != self.epoch {
            return;
        }
        self.capturing = false;
        if repaint.is_some() && self.end != self.capture_from && self.overtaken < MAX_OVERTAKEN {
            self.overtaken += 1;
            self.want_capture(effects);
            return;
        }
        self.overtaken = 0;
        let Some(repaint) = repaint else {
            // Nothing to repaint from: start them live rather than never.
            for slot in &mut self.slots {
                if slot.state == State::Waiting {
                    slot.state = State::Live;
                }
            }
            return;
        };
        self.deliver(repaint, self.capture_from, stream, effects);
    }

    /// Sends `repaint` to every waiting viewer, tagged with offset `from`
    /// (where the capture was asked for; the screen shows at least the
    /// bytes before it) and followed by the bytes the stream holds since,
    /// so nothing that overtook the capture is lost; they go live. When the
    /// stream no longer holds `from`, it is tagged with the current offset.
    fn deliver(&mut self, repaint: Bytes, from: u64, stream: &Stream, effects: &mut Vec<Effect>) {
        let tail = (from >= self.floor)
            .then(|| stream.held().between(from, self.end))
            .flatten();
        let (offset, tail) = match tail {
            Some(tail) => (from, tail),
            None => (self.end, Bytes::new()),
        };
        let size = self.size;
        self.slots.retain_mut(|slot| {
            if slot.state != State::Waiting {
                return true;
            }
            let event = ViewerEvent::Snapshot {
                offset,
                size,
                repaint: repaint.clone(),
            };
            slot.state = State::Live;
            if !lag_on_full(slot, slot.tx.try_send(event), effects) {
                return false;
            }
            if tail.is_empty() || slot.state != State::Live {
                return true;
            }
            let event = ViewerEvent::Output {
                offset: Some(offset),
                bytes: tail.clone(),
            };
            lag_on_full(slot, slot.tx.try_send(event), effects)
        });
    }

    /// The program was restarted (or its server rebuilt, the stream
    /// skipped output, or the terminal was resized): what came before no longer leads up to now, so no
    /// resume replays it and every viewer is repainted.
    pub(crate) fn discontinuity(&mut self, effects: &mut Vec<Effect>) {
        self.floor = self.end;
        // A capture still in flight shows the past: ask for a new one.
        self.epoch += 1;
        self.capturing = false;
        for slot in &mut self.slots {
            if slot.state == State::Live {
                slot.state = State::Waiting;
            }
        }
        if self.slots.iter().any(|slot| slot.state == State::Waiting) {
            self.want_capture(effects);
        }
    }

    /// The terminal's size changed: every viewer is told, then repainted
    /// from a capture taken after it.
    ///
    /// tmux reflowed its screen and history to the new size, a viewer
    /// reflows its own copy by rules of its own (xterm.js wraps, keeps the
    /// cursor and fills rows from its scrollback differently), so from here
    /// on the bytes alone no longer lead to what tmux shows: a viewer
    /// opened at 390 px on a terminal printed at 80 columns showed its
    /// prompt a row above tmux's. Nor does a capture asked for
    /// before the resize: it shows the old width, which the viewer then
    /// wrapped at the new one. So a resize is a discontinuity: no resume
    /// replays across it, a capture in flight is asked for again, and
    /// every viewer gets the new one. The caller resized the terminal
    /// before it called this, so the capture asked for now shows the new
    /// size.
    pub(crate) fn resized(&mut self, size: Size, effects: &mut Vec<Effect>) {
        if size == self.size {
            return;
        }
        self.size = size;
        self.slots.retain_mut(|slot| {
            if slot.state != State::Live {
                // A snapshot carries the size; a lagging viewer gets one.
                return true;
            }
            lag_on_full(slot, slot.tx.try_send(ViewerEvent::Resize(size)), effects)
        });
        self.discontinuity(effects);
    }

    /// The program exited: every viewer is told, even a lagging one. With
    /// `end`, the viewers are dropped, so their streams end after it; one
    /// that is not live then first gets the final screen (no later
    /// snapshot could repaint it), a live one has every byte already.
    pub(crate) fn exited(&mut self, exit: ExitStatus, end: bool, effects: &mut Vec<Effect>) {
        let mut missed = Vec::new();
        for slot in &self.slots {
            if end && slot.state != State::Live {
                missed.push(slot.tx.clone());
            } else {
                effects.push(Effect::Deliver(slot.tx.clone(), ViewerEvent::Exit(exit)));
            }
        }
        if !missed.is_empty() {
            effects.push(Effect::Farewell {
                viewers: missed,
                offset: self.end,
                size: self.size,
                exit,
            });
        }
        if end {
            self.slots.clear();
        }
    }

    fn want_capture(&mut self, effects: &mut Vec<Effect>) {
        if !self.capturing {
            self.capturing = true;
            self.capture_from = self.end;
            effects.push(Effect::Capture(self.epoch));
        }
    }
}

/// Applies a `try_send` result to `slot`; `false` drops the slot (its
/// viewer is gone).
fn lag_on_full(
    slot: &mut Slot,
    sent: Result<(), mpsc::error::TrySendError<ViewerEvent>>,
    effects: &mut Vec<Effect>,
) -> bool {
    match sent {
        Ok(()) => true,
        Err(mpsc::error::TrySendError::Full(_)) => {
            slot.state = State::Lagging;
            effects.push(Effect::WatchRoom(slot.id, slot.tx.clone()));
            true
        }
        Err(mpsc::error::TrySendError::Closed(_)) => false,
    }
}

#[cfg(test)]
#[path = "hub_tests.rs"]
mod tests;
