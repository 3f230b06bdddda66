//! [`PaneStream`]: one subscriber's bounded queue of a pane's events, and
//! its unsubscription on drop (which lets tmux continue a pane it paused
//! for lack of readers).

use std::sync::Arc;

use tokio::sync::mpsc;

use super::ClientShared;
use crate::control::PaneId;
use crate::control::subscribe::{PaneEvent, Sink, SinkEvent, SubscribeOptions};

/// One pane's output stream. Dropping it unsubscribes.
pub struct PaneStream {
    pane: PaneId,
    id: u64,
    rx: mpsc::Receiver<PaneEvent>,
    shared: Arc<ClientShared>,
}

impl PaneStream {
    pub(super) fn new(
        shared: &Arc<ClientShared>,
        pane: PaneId,
        opts: SubscribeOptions,
    ) -> PaneStream {
        let (tx, rx) = mpsc::channel(shared.opts.subscriber_capacity.max(2));
        let mut state = shared.lock();
        let id = state.routes.add(pane, tx, opts);
        if opts.snapshot_first && state.closed.is_none() {
            shared.resync_locked(&mut state, pane, id);
        }
        drop(state);
        PaneStream {
            pane,
            id,
            rx,
            shared: shared.clone(),
        }
    }

    /// Hands this subscription's events to `sink` from now on, where they
    /// are routed (see [`Sink`]); what was queued already goes first, all
    /// under the routing lock, so the sink sees the pane in order. The
    /// stream then queues nothing: [`recv`](Self::recv) only tells the
    /// end of the connection.
    pub(crate) fn into_sink(mut self, sink: Sink) -> PaneStream {
        let mut state = self.shared.lock();
        while let Ok(event) = self.rx.try_recv() {
            sink(SinkEvent::Pane(event));
        }
        if let Some(sub) = state.routes.sub_mut(self.pane, self.id) {
            sub.sink = Some(sink);
        }
        drop(state);
        self
    }

    /// The next event if one is queued, without waiting.
    pub fn try_recv(&mut self) -> Option<PaneEvent> {
        self.rx.try_recv().ok()
    }

    /// The next event; `None` once the connection closed (see
    /// [`PaneStream::close_reason`]).
    pub async fn recv(&mut self) -> Option<PaneEvent> {
        self.rx.recv().await
    }

    /// The pane this stream follows.
    pub fn pane(&self) -> PaneId {
        self.pane
    }

    /// Why the stream ended, once it has.
    pub fn close_reason(&self) -> Option<String> {
        self.shared.closed.borrow().clone()
    }
}

impl Drop for PaneStream {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        if state.routes.remove(self.pane, self.id) && state.closed.is_none() {
            self.shared
                .pane_switch_locked(&mut state, self.pane, "continue");
        }
    }
}

impl std::fmt::Debug for PaneStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PaneStream")
            .field("pane", &self.pane)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
