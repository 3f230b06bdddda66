//! The one judgement of "the program reads its terminal", free of I/O:
//! fed with what `/proc` said ([`reading::input_state`]) and the output
//! count at that moment, it answers [`Observed::Ready`] once the program
//! was seen reading twice (or as many times as asked) with no output
//! between, else how long to wait before looking again (backing off from
//! a short first pause, so a quick reader is caught at once and a long
//! wait costs few `/proc` reads). A program blocks for a moment in many
//! places (a shell while it starts, a REPL between two prompts): only a
//! second look with nothing printed between tells a reader that waits.
//!
//! [`reading::input_state`]: super::reading::input_state

use std::time::Duration;

/// The default first and longest pause between two looks.
const PAUSES: (Duration, Duration) = (Duration::from_millis(10), Duration::from_millis(100));

/// What the probe makes of one look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Observed {
    /// The program reads its terminal.
    Ready,
    /// Not (yet): look again after this long (or at the next output).
    Pause(Duration),
}

/// The state of one "does it read its terminal" judgement.
#[derive(Debug, Clone)]
pub(crate) struct InputProbe {
    /// The output count at the first of the looks that saw it reading.
    seen_at: Option<u64>,
    /// Looks in a row that saw it reading at that count.
    looks: u32,
    /// Looks needed.
    need: u32,
    pause: Duration,
    pauses: (Duration, Duration),
}

impl Default for InputProbe {
    fn default() -> InputProbe {
        InputProbe::new()
    }
}

impl InputProbe {
    /// A probe that needs two looks, 10 ms apart at first, backing off to
    /// 100 ms.
    pub(crate) fn new() -> InputProbe {
        InputProbe::with_pauses(PAUSES.0, PAUSES.1)
    }

    /// A probe with its own first and longest pause.
    pub(crate) fn with_pauses(first: Duration, longest: Duration) -> InputProbe {
        InputProbe {
            seen_at: None,
            looks: 0,
            need: 2,
            pause: first,
            pauses: (first, longest),
        }
    }

    /// Needs `looks` looks (at least one) instead of two.
    #[must_use]
    pub(crate) fn looks(mut self, looks: u32) -> InputProbe {
        self.need = looks.max(1);
        self
    }

    /// Takes one look: whether the program was `reading`, with `output`
    /// bytes seen so far.
    pub(crate) fn observe(&mut self, reading: bool, output: u64) -> Observed {
        if !reading {
            self.seen_at = None;
            self.looks = 0;
        } else if self.seen_at == Some(output) {
            self.looks += 1;
        } else {
            // A first sighting: confirm it soon.
            self.seen_at = Some(output);
            self.looks = 1;
            self.pause = self.pauses.0;
        }
        if self.looks >= self.need {
            return Observed::Ready;
        }
        let pause = self.pause;
        self.pause = (pause * 2).min(self.pauses.1);
        Observed::Pause(pause)
    }

    /// Output came: start over, with the short pause again.
    pub(crate) fn reset(&mut self) {
        self.seen_at = None;
        self.looks = 0;
        self.pause = self.pauses.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_looks_with_no_output_between_make_a_reader() {
        let mut probe = InputProbe::new();
        assert_eq!(probe.observe(false, 5), Observed::Pause(PAUSES.0));
        assert_eq!(probe.observe(false, 5), Observed::Pause(PAUSES.0 * 2));
        // A first sighting is confirmed soon.
        assert_eq!(probe.observe(true, 5), Observed::Pause(PAUSES.0));
        // Output between the looks: start over.
        assert_eq!(probe.observe(true, 9), Observed::Pause(PAUSES.0));
        assert_eq!(probe.observe(true, 9), Observed::Ready);
        // Not reading breaks the run; the pauses back off to the longest.
        let mut probe = InputProbe::new();
        for _ in 0..8 {
            assert!(matches!(probe.observe(false, 0), Observed::Pause(_)));
        }
        assert_eq!(probe.observe(false, 0), Observed::Pause(PAUSES.1));
        probe.reset();
        assert_eq!(probe.observe(false, 0), Observed::Pause(PAUSES.0));
        let mut once = InputProbe::new().looks(1);
        assert_eq!(once.observe(true, 0), Observed::Ready);
        let mut three = InputProbe::new().looks(3);
        assert!(matches!(three.observe(true, 0), Observed::Pause(_)));
        assert!(matches!(three.observe(true, 0), Observed::Pause(_)));
        assert_eq!(three.observe(true, 0), Observed::Ready);
    }
}
