//! What the client's handles and tasks share: the state under one lock
//! (pending replies in write order, stdin, the pane routes, raw links, the
//! exit watch), the in-flight limit, the task tracker and the close
//! reason; and the locked writes every caller and task go through, so a
//! line and its pending entry are queued together.

use std::collections::VecDeque;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, broadcast, mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::debug;

use super::link::{Link, Recipe};
use super::{ClientOptions, stdin, typist};
use crate::control::subscribe::{Effects, PaneInfo, Routes, SubState};
use crate::control::{Notification, PaneId, Reply};
use crate::tmux::command::TmuxCommand;
use crate::tmux::exit_handshake::ExitWatch;

pub(crate) struct ClientShared {
    pub(super) state: Mutex<State>,
    /// How many times a pane's raw link was added or removed (`State::raw`),
    /// bumped after the change: what `ControlClient::output_path` answers
    /// changes only with it, so a reader that saw the same count needs no
    /// look under the lock (`list` asks every terminal).
    pub(super) raw_changes: AtomicU64,
    pub(super) in_flight: Arc<Semaphore>,
    /// Every task of this client (reader, writer, stderr drain, reply
    /// watchdog, lag watchers); closed once the client is built, so `wait`
    /// means "all done".
    pub(super) tasks: TaskTracker,
    /// Cancelled by the reader once the connection is closed: stops the
    /// stderr drain and the lag watchers.
    pub(super) ended: CancellationToken,
    /// Made on the first subscription (a broadcast allocates its whole
    /// ring up front: `event_capacity` slots were most of an idle
    /// terminal's memory, and most terminals never have an observer; a
    /// send with no receiver reaches nobody either way). Taken on close,
    /// so every receiver sees `Closed` once drained.
    pub(super) events: Mutex<Option<broadcast::Sender<Notification>>>,
    pub(super) closed: watch::Sender<Option<String>>,
    pub(super) opts: ClientOptions,
    /// The `tmux -C` process of the current connection; 0: none (a
    /// direct link, or no connection).
    pub(super) pid: std::sync::atomic::AtomicU32,
    /// One write at a time, in arrival order (tokio's mutex is FIFO-fair),
    /// so two pastes never interleave; see `write.rs`.
    pub(super) input: tokio::sync::Mutex<typist::Typist>,
    /// Wakes the reply watchdog (`watchdog.rs`).
    pub(super) watchdog: Notify,
    /// How to link again once the connection was let go while idle
    /// (`linger.rs`); `None`: this client never lets go of it.
    pub(super) relink: Option<Recipe>,
    /// Wakes the linger task to link again: a line was queued while
    /// unlinked.
    pub(super) relink_wanted: Notify,
}

pub(super) struct State {
    /// Commands written and not yet answered, oldest first. The writer
    /// channel is fed under this lock, so FIFO order is write order.
    pub(super) pending: VecDeque<Pending>,
    /// tmux's stdin: written here, or queued for the writer task.
    pub(super) stdin: stdin::Stdin,
    pub(super) routes: Routes,
    /// Panes whose output comes from a raw pipe (`raw.rs`), not `%output`.
    pub(super) raw: std::collections::HashMap<PaneId, RawLink>,
    /// The exit handshake's marker scan ([`ClientOptions::exit_handshake`]).
    pub(super) exits: Option<ExitWatch>,
    pub(super) closed: Option<String>,
    /// What the reply watchdog sleeps until; `None`: it waits to be woken.
    pub(super) watchdog_at: Option<Instant>,
    /// Whether the connection to tmux is up, let go while idle, or coming
    /// back (`linger.rs`).
    pub(super) link: Link,
    /// When the last line was queued: the linger task lets go of the
    /// connection only after it has been quiet this long.
    pub(super) last_line: Instant,
    /// The stdin of a connection let go while idle, until its reader holds
    /// the handshake lock and drops it (its EOF detaches): see
    /// `linger.rs`.
    pub(super) leaving: Option<stdin::Stdin>,
}

impl State {
    /// Routes one chunk of `pane`'s output (either path) to its
    /// subscribers, then acknowledges an exit marker it completes: every
    /// byte before the marker has been routed by then.
    pub(super) fn output(&mut self, pane: PaneId, data: &Bytes, fx: &mut Effects) {
        self.routes.output(pane, data, fx);
        // A raw pane's relay acknowledges the marker itself, as soon as it
        // has read it (every linked process gets the bytes from it).
        if let Some(exits) = &mut self.exits
            && !self.raw.contains_key(&pane)
        {
            exits.seen(pane, data);
        }
    }
}

/// What a raw pane's reader task (`raw.rs`) is asked to do on its link.
#[derive(Debug)]
pub(super) enum RawAsk {
    /// Route everything the relay has read now; answered once done.
    Flush(oneshot::Sender<()>),
    /// Have the relay watch the pane's process `pid` (see
    /// `ControlClient::watch_raw_exit`); answered with the receiver its
    /// end resolves, or `None` where the relay does not watch.
    Watch {
        pid: u32,
        answer: oneshot::Sender<Option<oneshot::Receiver<()>>>,
    },
}

/// The routing state's link to a raw pane's reader task (`raw.rs`).
#[derive(Debug)]
pub(super) struct RawLink {
    pub(super) asks: mpsc::Sender<RawAsk>,
}

/// What a caller's command gets: tmux's reply, or word from the reply
/// watchdog that it was unanswered past its deadline.
pub(super) type Answer = std::result::Result<Reply, Overdue>;

/// A command tmux did not answer in time, and how long it was given: the
/// command timeout (see `watchdog.rs`), or the ready timeout of a relink
/// tmux did not answer, which failed the lines queued for it unwritten
/// (`linger.rs`).
#[derive(Debug)]
pub(super) struct Overdue(pub(super) std::time::Duration);

pub(super) enum Pending {
    /// A caller waits for the reply (or gave up: the send then fails).
    Caller {
        /// Taken when the watchdog tells the caller it is overdue; the
        /// entry stays until tmux answers, so later replies still match.
        tx: Option<oneshot::Sender<Answer>>,
        /// When the caller stops waiting.
        deadline: Instant,
        /// The caller's in-flight slot, held until tmux answered (or the
        /// connection closed), so that callers who give up cannot queue
        /// more than `max_in_flight` lines.
        _permit: Option<OwnedSemaphorePermit>,
    },
    /// The engine's own bookkeeping commands.
    Internal(Internal),
    /// An `if-shell -F` whose branches are one command each: when it
    /// succeeds, its branch's block follows and answers `then`; when it
    /// fails, no branch ran and its own block answers `then`.
    Guard(Box<Pending>),
}

impl Pending {
    /// A caller's entry, due by `deadline`, holding `permit`, and the
    /// receiver of its answer.
    fn caller(
        deadline: Instant,
        permit: Option<OwnedSemaphorePermit>,
    ) -> (Pending, oneshot::Receiver<Answer>) {
        let (tx, rx) = oneshot::channel();
        let caller = Pending::Caller {
            tx: Some(tx),
            deadline,
            _permit: permit,
        };
        (caller, rx)
    }
}

pub(super) enum Internal {
    /// Reply only logged when it fails.
    Ignore(&'static str),
    ResyncInfo {
        pane: PaneId,
        sub: u64,
    },
    ResyncCapture {
        pane: PaneId,
        sub: u64,
        /// Which of the subscriber's resyncs this capture answers.
        resync: u64,
    },
}

pub(super) async fn wait_closed(shared: &ClientShared) -> String {
    let mut rx = shared.closed.subscribe();
    loop {
        if let Some(reason) = rx.borrow_and_update().clone() {
            return reason;
        }
        if rx.changed().await.is_err() {
            return "the control connection closed".to_owned();
        }
    }
}

impl ClientShared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind; keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a line and its pending entry together, under the lock, so the
    /// FIFO matches the order tmux reads the lines in.
    pub(super) fn write_locked(&self, state: &mut State, line: &str, pending: Pending) {
        if state.stdin.write(line) {
            state.pending.push_back(pending);
        }
        state.last_line = Instant::now();
        self.want_link_locked(state);
    }

    /// Asks the linger task to link again if the connection was let go
    /// (`linger.rs`): one relink, however many callers want one meanwhile.
    pub(super) fn want_link_locked(&self, state: &mut State) {
        if let Link::Unlinked { wanted, .. } = &mut state.link
            && !*wanted
        {
            *wanted = true;
            self.relink_wanted.notify_one();
        }
    }

    /// Closes the client for good with `reason` (the first reason stays):
    /// every pending command fails, every pane stream and event stream
    /// ends, and the tasks that outlive a connection (the watchdog, raw
    /// readers, lag watchers, the linger task) stop.
    pub(super) fn close(&self, reason: String) {
        let pending = {
            let mut state = self.lock();
            if state.closed.is_some() {
                return;
            }
            state.closed = Some(reason.clone());
            // Dropping the senders ends every pane stream.
            state.routes.panes.clear();
            state.leaving = None;
            std::mem::take(&mut state.pending)
        };
        // Dropping the oneshot senders fails every waiting command.
        drop(pending);
        // Closing the broadcast ends every event stream (after what it has).
        drop(self.events.lock().unwrap_or_else(|e| e.into_inner()).take());
        self.closed.send_replace(Some(reason));
        self.ended.cancel();
    }

    /// Queues a caller's command, due by `deadline`, holding `permit`
    /// until tmux answers; `guarded` for an `if-shell -F` guard whose
    /// branch answers (see [`Pending::Guard`]). The answer comes on the
    /// receiver; it fails when the connection closes first.
    pub(super) fn call_locked(
        &self,
        state: &mut State,
        line: &str,
        deadline: Instant,
        permit: Option<OwnedSemaphorePermit>,
        guarded: bool,
    ) -> oneshot::Receiver<Answer> {
        let (caller, rx) = Pending::caller(deadline, permit);
        let pending = if guarded {
            Pending::Guard(Box::new(caller))
        } else {
            caller
        };
        self.write_locked(state, line, pending);
        self.watch_locked(state, deadline);
        rx
    }

    /// [`call_locked`](Self::call_locked) without waking the watchdog, for
    /// a caller that looks at the answer only later and times it itself
    /// (`write.rs`'s `Queued`), so a keystroke arms no timer; a watchdog
    /// that runs for another command still tells it once it is overdue.
    pub(super) fn queue_locked(
        &self,
        state: &mut State,
        line: &str,
        (deadline, permit): (Instant, Option<OwnedSemaphorePermit>),
    ) -> oneshot::Receiver<Answer> {
        let (caller, rx) = Pending::caller(deadline, permit);
        self.write_locked(state, line, caller);
        rx
    }

    pub(super) fn internal_locked(&self, state: &mut State, command: &TmuxCommand, what: Internal) {
        self.write_locked(state, command.line(), Pending::Internal(what));
    }

    pub(super) fn pane_switch_locked(&self, state: &mut State, pane: PaneId, switch: &'static str) {
        let command = TmuxCommand::new("refresh-client").opt("-A", format!("{pane}:{switch}"));
        self.internal_locked(state, &command, Internal::Ignore(switch));
    }

    /// Starts the capture that brings subscriber `sub` of `pane` back in
    /// sync: continue the pane if paused, read cursor and size, capture.
    /// The subscriber skips output until the newest of its captures is in.
    pub(super) fn resync_locked(&self, state: &mut State, pane: PaneId, sub: u64) {
        let Some(resync) = state.routes.start_resync(pane, sub) else {
            return;
        };
        let paused = match state.routes.panes.get_mut(&pane) {
            Some(route) => std::mem::replace(&mut route.paused, false),
            None => return,
        };
        if paused {
            self.pane_switch_locked(state, pane, "continue");
        }
        let info = TmuxCommand::new("list-panes")
            .target(pane)
            .opt("-F", PaneInfo::FORMAT);
        self.internal_locked(state, &info, Internal::ResyncInfo { pane, sub });
        let capture = TmuxCommand::new("capture-pane")
            .flag("-p")
            .flag("-e")
            .target(pane)
            .opt("-S", format!("-{}", self.opts.resync_history));
        self.internal_locked(
            state,
            &capture,
            Internal::ResyncCapture { pane, sub, resync },
        );
    }

    /// Applies routing effects that need no await: pauses, lag watchers.
    pub(super) fn apply_locked(self: &Arc<Self>, state: &mut State, fx: &mut Effects) {
        // Pausing only stops `%output`: a raw pane's pipe keeps flowing
        // and its reader keeps draining it.
        fx.pause.retain(|pane| !state.raw.contains_key(pane));
        if self.opts.pane_pause {
            for pane in fx.pause.drain(..) {
                debug!(%pane, "every subscriber lags: pausing the pane");
                self.pane_switch_locked(state, pane, "pause");
            }
        } else {
            fx.pause.clear();
        }
        for (pane, sub, tx) in fx.lagging.drain(..) {
            debug!(%pane, sub, "subscriber lags: skipping its output until it drains");
            let shared = Arc::downgrade(self);
            let ended = self.ended.clone();
            self.tasks.spawn(async move {
                // Wait until half the queue is free, so resyncs don't thrash.
                // A stream nobody reads (nor drops) must not keep the client
                // from finishing: stop when the connection ends.
                let room = (tx.max_capacity() / 2).max(1);
                let reserved = tokio::select! {
                    reserved = tx.reserve_many(room) => reserved.is_ok(),
                    () = ended.cancelled() => false,
                };
                if !reserved {
                    return;
                }
                if let Some(shared) = shared.upgrade() {
                    let mut state = shared.lock();
                    if state.closed.is_none()
                        && let Some(s) = state.routes.sub_mut(pane, sub)
                        && s.state == SubState::Lagging
                    {
                        shared.resync_locked(&mut state, pane, sub);
                    }
                }
            });
        }
    }
}
