//! Typing as the audit log records it: one line per burst of input (who,
//! which terminal, how many bytes, never the bytes), a burst ending after
//! [`QUIET`] without input or with the session. Sans IO: the pump passes
//! the clock in.

use tokio::time::{Duration, Instant};

/// The pause that ends a burst: longer than a person's pause between
/// words, shorter than one between commands they read the output of.
pub(super) const QUIET: Duration = Duration::from_secs(2);

/// The burst being typed.
#[derive(Debug, Default)]
pub(super) struct Burst {
    last: Option<Instant>,
    bytes: u64,
}

impl Burst {
    /// Counts `n` bytes typed at `now`; the byte count of the burst this
    /// input ended, if it starts a new one.
    pub(super) fn add(&mut self, n: usize, now: Instant) -> Option<u64> {
        let ended = match self.last {
            Some(last) if now.saturating_duration_since(last) > QUIET => self.finish(),
            _ => None,
        };
        self.bytes += n as u64;
        self.last = Some(now);
        ended
    }

    /// The byte count of the burst under way, if any, which ends it.
    pub(super) fn finish(&mut self) -> Option<u64> {
        let bytes = std::mem::take(&mut self.bytes);
        (bytes > 0).then_some(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_past_quiet_ends_a_burst() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let mut burst = Burst::default();
        assert_eq!(burst.add(3, at(0)), None);
        assert_eq!(burst.add(2, at(1_500)), None);
        assert_eq!(burst.add(1, at(3_000)), None);
        assert_eq!(burst.add(4, at(5_100)), Some(6));
        assert_eq!(burst.finish(), Some(4));
        assert_eq!(burst.finish(), None);
    }
}
