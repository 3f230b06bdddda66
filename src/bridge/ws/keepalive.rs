//! When to ping a WebSocket viewer and when to give up on it, sans IO: the
//! pump asks when to wake, reports what it heard, and applies the verdict.
//!
//! A viewer behind a dead NAT or a suspended laptop sends nothing and
//! reads nothing; TCP alone may hold such a connection for hours. So the
//! bridge pings every interval, and a peer that has sent no frame at all
//! (pong or otherwise) for one interval after a ping is dropped. A send
//! the peer never reads blocks the pump, so it is bounded by the same
//! rule: it may take until the peer would have been found dead had the
//! ping gone out on time.

use tokio::time::{Duration, Instant};

/// What the pump does when [`Keepalive::wake_at`] comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tick {
    /// Send a ping now.
    Ping,
    /// Nothing came back for a whole interval after a ping: close.
    Dead,
}

/// The ping schedule of one viewer.
#[derive(Debug)]
pub(super) struct Keepalive {
    /// `None`: pings are off.
    interval: Option<Duration>,
    /// The next wake: a ping, or the end of a ping's grace.
    next: Instant,
    /// A ping went out and no frame came back since.
    awaiting: bool,
}

impl Keepalive {
    /// Pings every `interval` from `now`; a zero interval turns them off.
    pub(super) fn new(interval: Duration, now: Instant) -> Keepalive {
        let interval = (!interval.is_zero()).then_some(interval);
        Keepalive {
            interval,
            next: now + interval.unwrap_or_default(),
            awaiting: false,
        }
    }

    /// When the pump must wake next; `None` when pings are off.
    pub(super) fn wake_at(&self) -> Option<Instant> {
        self.interval.map(|_| self.next)
    }

    /// The latest a send the peer does not read may finish by: the instant
    /// the peer would be found dead had the due ping gone out on time.
    pub(super) fn give_up_at(&self) -> Option<Instant> {
        let interval = self.interval?;
        Some(if self.awaiting {
            self.next
        } else {
            self.next + interval
        })
    }

    /// A frame came from the peer: it is alive.
    pub(super) fn heard(&mut self) {
        self.awaiting = false;
    }

    /// Called at [`wake_at`](Keepalive::wake_at) (or later).
    pub(super) fn tick(&mut self, now: Instant) -> Tick {
        if self.awaiting {
            return Tick::Dead;
        }
        self.awaiting = true;
        self.next = now + self.interval.unwrap_or_default();
        Tick::Ping
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn pings_each_interval_and_gives_up_one_interval_after_an_unanswered_ping() {
        let start = Instant::now();
        let mut keepalive = Keepalive::new(SECOND, start);
        assert_eq!(keepalive.wake_at(), Some(start + SECOND));
        assert_eq!(keepalive.give_up_at(), Some(start + 2 * SECOND));
        assert_eq!(keepalive.tick(start + SECOND), Tick::Ping);
        // Answered: the next wake pings again.
        keepalive.heard();
        assert_eq!(keepalive.wake_at(), Some(start + 2 * SECOND));
        assert_eq!(keepalive.tick(start + 2 * SECOND), Tick::Ping);
        // Not answered: one interval later the peer is dead.
        assert_eq!(keepalive.give_up_at(), Some(start + 3 * SECOND));
        assert_eq!(keepalive.wake_at(), Some(start + 3 * SECOND));
        assert_eq!(keepalive.tick(start + 3 * SECOND), Tick::Dead);
    }

    #[test]
    fn any_frame_counts_as_an_answer() {
        let start = Instant::now();
        let mut keepalive = Keepalive::new(SECOND, start);
        for n in 1..10 {
            assert_eq!(keepalive.tick(start + n * SECOND), Tick::Ping, "{n}");
            keepalive.heard();
        }
    }

    #[test]
    fn a_zero_interval_turns_pings_off() {
        let keepalive = Keepalive::new(Duration::ZERO, Instant::now());
        assert_eq!(keepalive.wake_at(), None);
        assert_eq!(keepalive.give_up_at(), None);
    }
}
