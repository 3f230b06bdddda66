//! A command as an integrated shell's marks delimit it: its [`Span`]
//! (where its output starts and ends in the stream, its exit code, when it
//! started and ended) and the bounded [`Echo`] of its command line. Plain
//! values: the command tracker (`super::tracker`) makes them.

use std::time::SystemTime;

/// The most bytes of the start of a command line's echo kept: a heredoc
/// pasted whole is cut there (its output is not).
pub const MAX_ECHO: usize = 4096;

/// The most bytes of the end of a command line's echo kept past
/// [`MAX_ECHO`]: enough for its last line.
pub const ECHO_TAIL: usize = 1024;

/// A command line's echo, bounded: its first [`MAX_ECHO`] bytes, its last
/// [`ECHO_TAIL`] bytes past those, and how many bytes it had in all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Echo {
    /// The first bytes (raw, escape sequences kept).
    pub head: Vec<u8>,
    /// Bytes past `head`, at most the last [`ECHO_TAIL`] (more while it
    /// grows: see [`Echo::tail`]).
    tail: Vec<u8>,
    /// Bytes echoed in all.
    pub len: u64,
}

impl Echo {
    /// An echo of `bytes`.
    pub fn of(bytes: &[u8]) -> Echo {
        let mut echo = Echo::default();
        echo.push(bytes);
        echo
    }

    /// Appends `bytes`.
    pub fn push(&mut self, bytes: &[u8]) {
        self.len += bytes.len() as u64;
        let room = MAX_ECHO.saturating_sub(self.head.len()).min(bytes.len());
        self.head.extend_from_slice(&bytes[..room]);
        let rest = &bytes[room..];
        if rest.is_empty() {
            return;
        }
        self.tail.extend_from_slice(rest);
        // Trimmed in batches, so a long echo costs a copy per
        // [`ECHO_TAIL`] bytes, not per chunk.
        if self.tail.len() > 2 * ECHO_TAIL {
            self.tail.drain(..self.tail.len() - ECHO_TAIL);
        }
    }

    /// The last bytes past the head (at most [`ECHO_TAIL`]); empty when
    /// the head holds the whole echo.
    pub fn tail(&self) -> &[u8] {
        &self.tail[self.tail.len().saturating_sub(ECHO_TAIL)..]
    }

    /// Whether the head holds every byte echoed.
    pub fn whole(&self) -> bool {
        self.len == self.head.len() as u64
    }

    pub(super) fn clear(&mut self) {
        *self = Echo::default();
    }
}

/// One command the shell marked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// The command line as the terminal echoed it (raw bytes, escape
    /// sequences kept; its start and end, see [`Echo`]); empty where it
    /// is not known.
    pub echo: Echo,
    /// The offset where its output starts (just past `C`): its id.
    pub start: u64,
    /// The offset where its output ends (its `D`'s first byte); `None`
    /// while it runs.
    pub end: Option<u64>,
    /// The status its `D` gave.
    pub exit_code: Option<i32>,
    /// When it started: the time its `C` carries (the shell's clock),
    /// else when that mark arrived.
    pub started: SystemTime,
    /// When it ended: the time its `D` carries, else when that arrived.
    pub ended: Option<SystemTime>,
}

impl Span {
    /// Whether no end came yet.
    pub fn running(&self) -> bool {
        self.end.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_echo_keeps_its_start_its_end_and_its_size() {
        let mut echo = Echo::default();
        let line = b"> a line of a long heredoc\r\n";
        echo.push(b"cat <<'EOF'\r\n");
        for _ in 0..1000 {
            echo.push(line);
        }
        echo.push(b"> EOF");
        assert_eq!(echo.len, 13 + 1000 * line.len() as u64 + 5);
        assert_eq!(echo.head.len(), MAX_ECHO);
        assert!(echo.head.starts_with(b"cat <<'EOF'\r\n"));
        assert_eq!(echo.tail().len(), ECHO_TAIL);
        assert!(echo.tail().ends_with(b"\r\n> EOF"));
        assert!(!echo.whole());
        let short = Echo::of(b"echo hi");
        assert!(short.whole() && short.tail().is_empty() && short.head == b"echo hi");
    }
}
