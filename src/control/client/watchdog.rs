//! The reply watchdog: tells a caller whose command tmux has not answered
//! within [`ClientOptions::command_timeout`] that it is overdue, with one
//! timer per client instead of one per command, and none at all while no
//! command is pending.
//!
//! Why not `tokio::time::timeout` around each reply: every keystroke is a
//! command, and each one armed a timer of its own; a burst of commands
//! (a paste, a thousand spawns) armed as many. Here a caller's command
//! carries its deadline in its pending entry; the watchdog sleeps until
//! the earliest one, and is woken by a new command only when that command
//! is due earlier than what it sleeps for (never while commands are in
//! flight: deadlines grow with the FIFO) or when it sleeps for nothing at
//! all. The reader wakes it when tmux has answered the last pending
//! command, and it drops its timer: an idle client, with nothing
//! outstanding, has no timer and never wakes (a client used to keep its
//! timer a whole period after its last command, so the thousand clients of
//! a burst of spawns each woke once, ten seconds later). A keystroke, which
//! is answered before the next, thus arms and drops the timer: two polls
//! of this task on the runtime thread that is running anyway, and, when
//! the runtime had no earlier timer, one write to its driver's eventfd
//! (tokio's timer takes the new deadline), off the echo's path: the
//! command is written before the watchdog runs, and the echo comes after
//! the reply. Wakes fall on a grid of 1/16 of the timeout shared by every
//! client, so the clients of a burst whose commands are all overdue (a
//! stopped machine) wake in a few turns of the runtime's timer, not one
//! each. A bridge viewer's keystroke arms nothing: its answer is queued
//! unwatched (`ClientShared::queue_locked`) and timed by its caller when it
//! looks at it (`write.rs`'s `Queued`).
//!
//! An overdue caller is told so and stops waiting; its entry stays in the
//! FIFO, holding its in-flight slot, until tmux answers it (the answer is
//! then dropped), so the replies after it still meet their own commands.
//!
//! [`ClientOptions::command_timeout`]: super::ClientOptions::command_timeout

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::ClientShared;
use super::shared::{Answer, Overdue, Pending, State};

/// Runs until the client's connection has ended.
pub(super) async fn watch_replies(shared: Arc<ClientShared>) {
    loop {
        let next = {
            let mut state = shared.lock();
            if state.closed.is_some() {
                return;
            }
            let timeout = shared.opts.command_timeout;
            // No caller waiting: no timer (`sleep_until(None)`).
            let next = expire(&mut state, Instant::now(), timeout).map(|at| on_grid(at, timeout));
            state.watchdog_at = next;
            next
        };
        let wake = shared.watchdog.notified();
        tokio::select! {
            () = shared.ended.cancelled() => return,
            () = wake => {}
            () = sleep_until(next) => {}
        }
    }
}

/// Watchdogs wake on a grid of this fraction of their command timeout.
const GRID_DIVISOR: u32 = 16;

/// `at`, or the first instant after it on the grid every client with this
/// timeout shares: watchdogs whose deadlines fall in one slot wake in one
/// turn of the runtime's timer (one wake-up for a thousand terminals
/// spawned together, not a thousand), and an overdue caller is told at
/// most 1/16 of its timeout late.
pub(super) fn on_grid(at: Instant, timeout: Duration) -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    let origin = *ORIGIN.get_or_init(Instant::now);
    let grid = (timeout / GRID_DIVISOR)
        .max(Duration::from_millis(1))
        .as_nanos();
    let slots = at
        .saturating_duration_since(origin)
        .as_nanos()
        .div_ceil(grid);
    u64::try_from(slots * grid)
        .map(|since| origin + Duration::from_nanos(since))
        .map_or(at, |on| on.max(at))
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Tells every caller due by `now` that it is overdue (given `timeout`); the earliest
/// deadline of those still waiting.
fn expire(state: &mut State, now: Instant, timeout: Duration) -> Option<Instant> {
    let mut next: Option<Instant> = None;
    for pending in &mut state.pending {
        // Callers still waiting: not yet told, not internal.
        let Some((tx @ Some(_), deadline)) = pending.caller_mut() else {
            continue;
        };
        if deadline <= now {
            if let Some(tx) = tx.take() {
                let _ = tx.send(Err(Overdue(timeout)));
            }
        } else {
            next = Some(next.map_or(deadline, |n| n.min(deadline)));
        }
    }
    next
}

impl ClientShared {
    /// Wakes the watchdog when a command just queued is due before what it
    /// sleeps for (or it sleeps for nothing); called under the state lock.
    pub(super) fn watch_locked(&self, state: &mut State, deadline: Instant) {
        let wake = on_grid(deadline, self.opts.command_timeout);
        if state.watchdog_at.is_none_or(|at| wake < at) {
            // Set here so that a burst wakes it once; it corrects the
            // value itself when it runs.
            state.watchdog_at = Some(wake);
            self.watchdog.notify_one();
        }
    }

    /// Lets the watchdog drop its timer once tmux has answered every
    /// pending command; called under the state lock by the reader. (While
    /// commands are pending but none has a caller waiting, the timer runs
    /// out once and is not armed again.)
    pub(super) fn unwatch_locked(&self, state: &mut State) {
        if state.pending.is_empty() && state.watchdog_at.take().is_some() {
            self.watchdog.notify_one();
        }
    }

    /// Whether the watchdog has a timer armed (or is about to arm one).
    pub(super) fn watching(&self) -> bool {
        self.lock().watchdog_at.is_some()
    }
}

impl Pending {
    /// A caller's reply sender (`None` once told it is overdue) and its
    /// deadline, looking through a guard to the command it guards.
    fn caller_mut(&mut self) -> Option<(&mut Option<oneshot::Sender<Answer>>, Instant)> {
        match self {
            Pending::Caller { tx, deadline, .. } => Some((tx, *deadline)),
            Pending::Guard(then) => then.caller_mut(),
            Pending::Internal(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wakes_fall_on_a_shared_grid_never_before_the_deadline() {
        let timeout = Duration::from_secs(10);
        let grid = timeout / GRID_DIVISOR;
        let now = Instant::now();
        let mut slots = std::collections::BTreeSet::new();
        for ms in (0..2_000).step_by(7) {
            let at = now + timeout + Duration::from_millis(ms);
            let wake = on_grid(at, timeout);
            assert!(wake >= at && wake - at <= grid, "{ms} ms: {:?}", wake - at);
            slots.insert(wake);
        }
        // 2 s of deadlines share 2 s / 625 ms + 1 slots at most.
        assert!(slots.len() <= 5, "{} slots", slots.len());
        // A tiny timeout still gets a grid of its own size, not a zero one.
        let tiny = Duration::from_micros(10);
        let at = now + tiny;
        assert!(on_grid(at, tiny) >= at);
    }
}
