//! Per-pane output subscriptions and their flow control.
//!
//! The client's reader task must never stop reading tmux: a lone control
//! client that stalls makes tmux stop reading the pane, which blocks the
//! program in `write()`. So a subscriber whose bounded queue fills up is not
//! waited for. It is marked lagging and its output is dropped; when every
//! subscriber of a pane lags, the pane is paused in tmux
//! (`refresh-client -A '%N:pause'`) so the pipe goes quiet too. Once the
//! subscriber has drained half its queue it gets one [`PaneEvent::Resync`]
//! (screen, cursor and recent history from `capture-pane`) and then live
//! output again, in stream order, so it loses no context.
//!
//! This module holds the routing state and its transitions; it never touches
//! the process. Commands it needs are queued through the client.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::PaneId;

/// What a pane subscriber receives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PaneEvent {
    /// Bytes the program wrote, exactly (UTF-8 may be split across events).
    Output(Bytes),
    /// The pane's state after output was skipped: replaces whatever the
    /// subscriber knew; live output continues after it.
    Resync(Snapshot),
}

/// A pane's screen and recent history, as `capture-pane -e` gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The pane.
    pub pane: PaneId,
    /// Width in columns.
    pub width: u16,
    /// Height in rows.
    pub height: u16,
    /// Cursor column, 0-based.
    pub cursor_x: u16,
    /// Cursor row, 0-based.
    pub cursor_y: u16,
    /// Whether the program is on the alternate screen (a full-screen TUI).
    pub alternate_screen: bool,
    /// Lines of history above the screen, oldest first, with SGR attributes.
    pub history: Vec<Bytes>,
    /// The visible lines, top first, with SGR attributes.
    pub screen: Vec<Bytes>,
}

impl Snapshot {
    /// A snapshot from `capture-pane -p -e -S -N` lines (history, then the
    /// screen's `info.height` lines) and the pane's `list-panes` info.
    pub(crate) fn from_capture(pane: PaneId, info: PaneInfo, mut lines: Vec<Bytes>) -> Snapshot {
        let split = lines.len().saturating_sub(usize::from(info.height));
        let screen = lines.split_off(split);
        Snapshot {
            pane,
            width: info.width,
            height: info.height,
            cursor_x: info.cursor_x,
            cursor_y: info.cursor_y,
            alternate_screen: info.alternate,
            history: lines,
            screen,
        }
    }

    /// Bytes that, written to a fresh terminal of the same size, redraw the
    /// history and screen and put the cursor back.
    pub fn to_ansi(&self) -> Vec<u8> {
        let mut out = b"\x1b[0m\x1b[H\x1b[2J".to_vec();
        let lines = self.history.iter().chain(self.screen.iter());
        for (i, line) in lines.enumerate() {
            if i > 0 {
                out.extend_from_slice(b"\x1b[0m\r\n");
            }
            out.extend_from_slice(line);
        }
        out.extend_from_slice(b"\x1b[0m");
        out.extend_from_slice(
            format!("\x1b[{};{}H", self.cursor_y + 1, self.cursor_x + 1).as_bytes(),
        );
        out
    }
}

/// How a subscriber that falls behind is treated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Delivery {
    /// Never block the reader: skip output while the queue is full, pause
    /// the pane in tmux when nobody keeps up, then resync. The default.
    #[default]
    Resync,
    /// Block the reader until the subscriber takes each event: no byte is
    /// lost, and tmux in turn stops reading the pane (the program blocks).
    /// Only for a client with a single consumer and no `pause-after` (like
    /// `tmux-engine run`), since it stalls every other use of the client.
    /// Once the client detaches, what the subscriber does not take at once
    /// is dropped: a stalled subscriber cannot hold the detach up.
    Lossless,
}

/// Options of one pane subscription: `SubscribeOptions::default()
/// .delivery(Delivery::Lossless)`.
#[derive(Clone, Copy, Debug, Default)]
#[non_exhaustive]
pub struct SubscribeOptions {
    /// Lag handling.
    pub delivery: Delivery,
    /// Start with a [`PaneEvent::Resync`] of the current screen, so a
    /// subscriber that joins late sees what is already there.
    pub snapshot_first: bool,
}

setters!(SubscribeOptions {
    delivery: Delivery,
    snapshot_first: bool,
});

/// A subscriber that takes each event where it is routed, under the
/// client's routing lock, instead of from a queue: the registry's stream
/// (a watcher task's wake-up was one more hop on every echo's way). It
/// never lags, so it follows the pane in the same order a queue would,
/// and is resynced only when tmux paused the pane (`pause-after`). It
/// must be quick and must not call the client (its lock is held).
pub(crate) type Sink = Arc<dyn Fn(SinkEvent) + Send + Sync>;

/// What a [`Sink`] takes: every [`PaneEvent`], and on the raw path what
/// only the registry's stream is told (a queued subscriber is resynced
/// instead, or simply hears nothing more).
#[derive(Debug)]
pub(crate) enum SinkEvent {
    /// What a queue would get.
    Pane(PaneEvent),
    /// This process fell further behind the pane's relay than it holds:
    /// the bytes before offset `to` of the relay's stream never reach it;
    /// output continues at `to`.
    Skip {
        /// The relay's offset where output continues.
        to: u64,
    },
    /// The pane's output stopped reaching this process while the pane
    /// lives on (its relay was killed or its pipe replaced), with why.
    Lost(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SubState {
    Live,
    Lagging,
    Resyncing,
}

pub(crate) struct Sub {
    pub(crate) id: u64,
    pub(crate) tx: mpsc::Sender<PaneEvent>,
    pub(crate) state: SubState,
    pub(crate) delivery: Delivery,
    /// Cursor and size from the resync's `list-panes`, waiting for the capture.
    pub(crate) info: Option<PaneInfo>,
    /// The number of the newest resync asked for. A capture answering an
    /// older one is stale: tmux paused the pane while it was under way, so
    /// output between that capture and the `continue` never reached us.
    pub(crate) resync: u64,
    /// Takes the events instead of `tx`, which then only tells that the
    /// subscriber is still there (see [`Sink`]).
    pub(crate) sink: Option<Sink>,
}

impl Sub {
    /// Hands `event` over: to the sink, else into the queue unless it is
    /// full (the subscriber then lags, see [`Routes::output`]). Lossless
    /// events are the caller's to block on.
    fn offer(&mut self, pane: PaneId, event: PaneEvent, fx: &mut Effects) {
        if let Some(sink) = &self.sink {
            sink(SinkEvent::Pane(event));
            return;
        }
        match self.delivery {
            Delivery::Lossless => fx.blocking.push((self.tx.clone(), event)),
            Delivery::Resync => {
                if self.tx.try_send(event).is_err() {
                    self.state = SubState::Lagging;
                    fx.lagging.push((pane, self.id, self.tx.clone()));
                }
            }
        }
    }
}

/// Cursor and geometry of a pane, read before a capture.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PaneInfo {
    pub(crate) cursor_x: u16,
    pub(crate) cursor_y: u16,
    pub(crate) width: u16,
    pub(crate) height: u16,
    pub(crate) alternate: bool,
}

impl PaneInfo {
    /// The `list-panes -F` format whose output [`PaneInfo::parse`] reads.
    pub(crate) const FORMAT: &'static str =
        "#{cursor_x} #{cursor_y} #{pane_width} #{pane_height} #{alternate_on}";

    pub(crate) fn parse(line: &[u8]) -> Option<PaneInfo> {
        let text = std::str::from_utf8(line).ok()?;
        let mut it = text.split(' ').map(|f| f.parse::<u16>().ok());
        Some(PaneInfo {
            cursor_x: it.next()??,
            cursor_y: it.next()??,
            width: it.next()??,
            height: it.next()??,
            alternate: it.next()?? == 1,
        })
    }
}

/// The subscribers of one pane.
#[derive(Default)]
pub(crate) struct PaneRoute {
    pub(crate) subs: Vec<Sub>,
    /// We asked tmux to pause this pane (or tmux did and we have not yet
    /// continued it).
    pub(crate) paused: bool,
}

impl PaneRoute {
    /// Whether no subscriber waits on tmux: none paused, lagging or
    /// resyncing (a resync is commands to come).
    pub(crate) fn quiet(&self) -> bool {
        !self.paused && self.subs.iter().all(|sub| sub.state == SubState::Live)
    }
}

/// A send that must be awaited outside the state lock (lossless delivery).
pub(crate) type BlockingSend = (mpsc::Sender<PaneEvent>, PaneEvent);

/// What routing asks the client to do once the lock is released.
#[derive(Default)]
pub(crate) struct Effects {
    /// Sends to lossless subscribers, in order.
    pub(crate) blocking: Vec<BlockingSend>,
    /// Subscribers that just started lagging: wait for room, then resync.
    pub(crate) lagging: Vec<(PaneId, u64, mpsc::Sender<PaneEvent>)>,
    /// Pause these panes in tmux.
    pub(crate) pause: Vec<PaneId>,
}

/// All pane routes of a client.
#[derive(Default)]
pub(crate) struct Routes {
    pub(crate) panes: HashMap<PaneId, PaneRoute>,
    next_id: u64,
}

impl Routes {
    pub(crate) fn add(
        &mut self,
        pane: PaneId,
        tx: mpsc::Sender<PaneEvent>,
        opts: SubscribeOptions,
    ) -> u64 {
        self.add_sink(pane, tx, opts, None)
    }

    /// [`add`](Self::add), with the events going to `sink` when given.
    pub(crate) fn add_sink(
        &mut self,
        pane: PaneId,
        tx: mpsc::Sender<PaneEvent>,
        opts: SubscribeOptions,
        sink: Option<Sink>,
    ) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        let state = if opts.snapshot_first {
            SubState::Resyncing
        } else {
            SubState::Live
        };
        self.panes.entry(pane).or_default().subs.push(Sub {
            id,
            tx,
            state,
            delivery: opts.delivery,
            info: None,
            resync: 0,
            sink,
        });
        id
    }

    /// Marks a subscriber as resyncing and returns the number its capture
    /// must answer to (see [`Routes::deliver_snapshot`]); `None` when it is
    /// not subscribed.
    pub(crate) fn start_resync(&mut self, pane: PaneId, id: u64) -> Option<u64> {
        let sub = self.sub_mut(pane, id)?;
        sub.state = SubState::Resyncing;
        sub.resync += 1;
        Some(sub.resync)
    }

    /// Removes a subscriber; returns true when the pane was paused by us and
    /// nobody is left to resync it, so it should be continued.
    pub(crate) fn remove(&mut self, pane: PaneId, id: u64) -> bool {
        let Some(route) = self.panes.get_mut(&pane) else {
            return false;
        };
        route.subs.retain(|s| s.id != id);
        if route.subs.is_empty() {
            let paused = route.paused;
            self.panes.remove(&pane);
            return paused;
        }
        false
    }

    pub(crate) fn sub_mut(&mut self, pane: PaneId, id: u64) -> Option<&mut Sub> {
        self.panes
            .get_mut(&pane)?
            .subs
            .iter_mut()
            .find(|s| s.id == id)
    }

    /// Routes one chunk of output to the pane's subscribers.
    pub(crate) fn output(&mut self, pane: PaneId, data: &Bytes, fx: &mut Effects) {
        let Some(route) = self.panes.get_mut(&pane) else {
            return;
        };
        route.subs.retain(|s| !s.tx.is_closed());
        for sub in &mut route.subs {
            if sub.state != SubState::Live {
                continue;
            }
            sub.offer(pane, PaneEvent::Output(data.clone()), fx);
        }
        if !route.paused
            && !route.subs.is_empty()
            && route.subs.iter().all(|s| s.state == SubState::Lagging)
        {
            route.paused = true;
            fx.pause.push(pane);
        }
    }

    /// The raw path skipped to offset `to` (see [`SinkEvent::Skip`]): the
    /// stream's sink is told, every queued subscriber lags (and is resynced
    /// as after a full queue).
    pub(crate) fn skip(&mut self, pane: PaneId, to: u64, fx: &mut Effects) {
        let Some(route) = self.panes.get_mut(&pane) else {
            return;
        };
        for sub in &mut route.subs {
            if let Some(sink) = &sub.sink {
                sink(SinkEvent::Skip { to });
            } else if sub.state == SubState::Live {
                sub.state = SubState::Lagging;
                fx.lagging.push((pane, sub.id, sub.tx.clone()));
            }
        }
    }

    /// The raw path stopped reaching this process (see [`SinkEvent::Lost`]):
    /// the stream's sink is told; queued subscribers hear nothing more.
    pub(crate) fn lost(&mut self, pane: PaneId, why: &str) {
        let Some(route) = self.panes.get_mut(&pane) else {
            return;
        };
        for sub in &route.subs {
            if let Some(sink) = &sub.sink {
                sink(SinkEvent::Lost(why.to_owned()));
            }
        }
    }

    /// Delivers the snapshot of resync number `resync` to a resyncing
    /// subscriber, which goes live again. A snapshot of an older resync is
    /// dropped: the subscriber stays resyncing until the newest one arrives.
    pub(crate) fn deliver_snapshot(
        &mut self,
        pane: PaneId,
        id: u64,
        resync: u64,
        snap: Snapshot,
        fx: &mut Effects,
    ) {
        let Some(sub) = self.sub_mut(pane, id) else {
            return;
        };
        if sub.state != SubState::Resyncing || sub.resync != resync {
            return;
        }
        sub.state = SubState::Live;
        sub.offer(pane, PaneEvent::Resync(snap), fx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> SubscribeOptions {
        SubscribeOptions::default()
    }

    /// A one-line snapshot showing `line`.
    fn screen(pane: PaneId, line: &'static [u8]) -> Snapshot {
        Snapshot {
            pane,
            width: 10,
            height: 1,
            cursor_x: 0,
            cursor_y: 0,
            alternate_screen: false,
            history: vec![],
            screen: vec![Bytes::from_static(line)],
        }
    }

    #[test]
    fn full_queue_lags_and_pauses_only_when_everyone_lags() {
        let mut routes = Routes::default();
        let pane = PaneId(1);
        let (tx_a, mut rx_a) = mpsc::channel(1);
        let (tx_b, _rx_b) = mpsc::channel(1);
        let a = routes.add(pane, tx_a, opts());
        let b = routes.add(pane, tx_b, opts());
        let data = Bytes::from_static(b"x");

        let mut fx = Effects::default();
        routes.output(pane, &data, &mut fx);
        assert!(fx.lagging.is_empty() && fx.pause.is_empty());

        // Both queues are full now: both lag, the pane is paused once.
        let mut fx = Effects::default();
        routes.output(pane, &data, &mut fx);
        assert_eq!(fx.lagging.len(), 2);
        assert_eq!(fx.pause, vec![pane]);
        let mut fx = Effects::default();
        routes.output(pane, &data, &mut fx);
        assert!(fx.pause.is_empty(), "pause is requested once");

        assert_eq!(rx_a.try_recv().ok(), Some(PaneEvent::Output(data.clone())));
        assert!(rx_a.try_recv().is_err(), "lagging subscribers get nothing");
        assert_eq!(
            routes.sub_mut(pane, a).map(|s| s.state),
            Some(SubState::Lagging)
        );
        assert_eq!(
            routes.sub_mut(pane, b).map(|s| s.state),
            Some(SubState::Lagging)
        );
    }

    #[test]
    fn snapshot_brings_a_resyncing_subscriber_back_live() {
        let mut routes = Routes::default();
        let pane = PaneId(2);
        let (tx, mut rx) = mpsc::channel(4);
        let id = routes.add(
            pane,
            tx,
            SubscribeOptions {
                snapshot_first: true,
                ..opts()
            },
        );
        let mut fx = Effects::default();
        routes.output(pane, &Bytes::from_static(b"before"), &mut fx);
        assert!(rx.try_recv().is_err(), "output before the capture is in it");

        let resync = routes.start_resync(pane, id).expect("subscribed");
        let snap = screen(pane, b"before");
        routes.deliver_snapshot(pane, id, resync, snap.clone(), &mut fx);
        routes.output(pane, &Bytes::from_static(b"after"), &mut fx);
        assert_eq!(rx.try_recv().ok(), Some(PaneEvent::Resync(snap)));
        assert_eq!(
            rx.try_recv().ok(),
            Some(PaneEvent::Output(Bytes::from_static(b"after")))
        );
    }

    #[test]
    fn a_snapshot_overtaken_by_a_newer_resync_is_dropped() {
        let mut routes = Routes::default();
        let pane = PaneId(4);
        let (tx, mut rx) = mpsc::channel(4);
        let id = routes.add(pane, tx, opts());
        let mut fx = Effects::default();
        // tmux paused the pane while the first capture was under way.
        let first = routes.start_resync(pane, id).expect("subscribed");
        let second = routes.start_resync(pane, id).expect("subscribed");
        routes.deliver_snapshot(pane, id, first, screen(pane, b"stale"), &mut fx);
        routes.output(pane, &Bytes::from_static(b"in the newer capture"), &mut fx);
        assert!(rx.try_recv().is_err(), "still resyncing");

        let fresh = screen(pane, b"fresh");
        routes.deliver_snapshot(pane, id, second, fresh.clone(), &mut fx);
        routes.output(pane, &Bytes::from_static(b"live"), &mut fx);
        assert_eq!(rx.try_recv().ok(), Some(PaneEvent::Resync(fresh)));
        assert_eq!(
            rx.try_recv().ok(),
            Some(PaneEvent::Output(Bytes::from_static(b"live")))
        );
        assert!(rx.try_recv().is_err());
        assert!(routes.start_resync(pane, id + 1).is_none());
    }

    #[test]
    fn removing_the_last_subscriber_of_a_paused_pane_asks_to_continue() {
        let mut routes = Routes::default();
        let pane = PaneId(3);
        let (tx, _rx) = mpsc::channel(1);
        let id = routes.add(pane, tx, opts());
        let mut fx = Effects::default();
        routes.output(pane, &Bytes::from_static(b"a"), &mut fx);
        routes.output(pane, &Bytes::from_static(b"b"), &mut fx);
        assert_eq!(fx.pause, vec![pane]);
        assert!(routes.remove(pane, id));
        assert!(routes.panes.is_empty());
    }

    #[test]
    fn pane_info_parses_list_panes_output() {
        let info = PaneInfo::parse(b"3 4 80 24 1").expect("valid");
        assert_eq!(
            (info.cursor_x, info.cursor_y, info.width, info.height),
            (3, 4, 80, 24)
        );
        assert!(info.alternate);
        assert!(PaneInfo::parse(b"3 4 80").is_none());
        assert!(PaneInfo::parse(b"a b c d e").is_none());
    }

    #[test]
    fn to_ansi_redraws_lines_and_cursor() {
        let snap = Snapshot {
            pane: PaneId(0),
            width: 10,
            height: 2,
            cursor_x: 2,
            cursor_y: 1,
            alternate_screen: false,
            history: vec![Bytes::from_static(b"old")],
            screen: vec![Bytes::from_static(b"$ ls"), Bytes::from_static(b"$ ")],
        };
        let ansi = String::from_utf8(snap.to_ansi()).expect("ascii");
        assert_eq!(
            ansi,
            "\x1b[0m\x1b[H\x1b[2Jold\x1b[0m\r\n$ ls\x1b[0m\r\n$ \x1b[0m\x1b[2;3H"
        );
    }
}
