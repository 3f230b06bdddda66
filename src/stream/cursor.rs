//! Output cursors: a place in a terminal's output stream that a later
//! `read since` or a returning viewer resumes from, and the escape
//! stripping every text view of that stream shares.
//!
//! A cursor is the stream offset of a byte with the **epoch** of the
//! stream it counts in: a random token drawn once per stream where the
//! pane's bytes are first read. On the raw path that is the terminal's
//! resident relay (`tmux::relay`), shared by every engine process on the
//! host, so a cursor from one process reads the same bytes in another; a
//! new epoch means the stream itself restarted (a new server, a new
//! relay). Where a process reads `%output` itself, its stream is its own
//! and so is the epoch. Offsets restart at 0 in a new stream, so an
//! offset alone would silently mean other bytes after a restart; with the
//! epoch, such a cursor is *stale*, and a read answers it from the oldest
//! byte still held, saying so ([`CursorGap::Stale`]).

use std::fmt;
use std::str::FromStr;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::vocab::escape_sequence;
use crate::{Error, Result};

/// A place in one terminal's output stream, written `EPOCH:OFFSET`
/// (16 hex digits, a colon, a decimal byte offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OutputCursor {
    /// The stream the offset counts in.
    pub epoch: u64,
    /// Bytes of that stream before this place.
    pub offset: u64,
}

impl OutputCursor {
    /// A fresh epoch for a new output stream: random, so two streams (of
    /// one process or two) do not share one.
    pub fn new_epoch() -> u64 {
        crate::vocab::stream_epoch()
    }
}

impl fmt::Display for OutputCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}:{}", self.epoch, self.offset)
    }
}

impl FromStr for OutputCursor {
    type Err = Error;

    fn from_str(text: &str) -> Result<OutputCursor> {
        let bad = || {
            Error::InvalidInput(format!(
                "cursor {text:?} is not EPOCH:OFFSET (as next_cursor or a send's cursor give it)"
            ))
        };
        let (epoch, offset) = text.split_once(':').ok_or_else(bad)?;
        if epoch.len() != 16 {
            return Err(bad());
        }
        Ok(OutputCursor {
            epoch: u64::from_str_radix(epoch, 16).map_err(|_| bad())?,
            offset: offset.parse().map_err(|_| bad())?,
        })
    }
}

/// Why a read from a cursor does not start at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum CursorGap {
    /// The bytes after the cursor are no longer held (the terminal's
    /// output ring is bounded); the read resumes at the oldest held.
    Evicted,
    /// The cursor counts in another stream (the engine restarted, or the
    /// terminal was recreated, since it was given); the read resumes at
    /// the oldest byte held.
    Stale,
}

/// The output from a cursor to the stream's end, as far as it is held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputSince {
    /// The bytes, exactly as the program wrote them.
    pub bytes: Bytes,
    /// Where `bytes` begin: the cursor asked for, or where the read
    /// resumed past a gap.
    pub from: OutputCursor,
    /// Why `from` is not the cursor asked for.
    pub gap: Option<CursorGap>,
}

impl OutputSince {
    /// The cursor after the last byte.
    pub fn end(&self) -> OutputCursor {
        OutputCursor {
            epoch: self.from.epoch,
            offset: self.from.offset + self.bytes.len() as u64,
        }
    }
}

/// Output as text: escape sequences (CSI, OSC, DCS and two-byte ESC
/// sequences) and control characters other than `\n` and `\t` removed,
/// `\r\n` folded to `\n`, invalid UTF-8 replaced.
pub fn strip_escapes(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            0x1b => i = escape_sequence(bytes, i).1,
            b'\n' | b'\t' => {
                out.push(bytes[i]);
                i += 1;
            }
            byte if byte < 0x20 || byte == 0x7f => i += 1,
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn strips_escapes_and_controls() {
        let cases: &[(&[u8], &str)] = &[
            (b"plain", "plain"),
            (b"a\r\nb\n", "a\nb\n"),
            (b"\x1b[1;31mred\x1b[0m", "red"),
            (b"\x1b]0;title\x07x", "x"),
            (b"\x1b]8;;http://x\x1b\\link", "link"),
            (b"\x1b]133;D;1\x07$ ", "$ "),
            (b"\x1b(Bq\x1b=z", "qz"),
            (b"tab\there\x08", "tab\there"),
            (b"\xff\xfe", "\u{fffd}\u{fffd}"),
            (b"cut\x1b[", "cut"),
        ];
        for (input, want) in cases {
            assert_eq!(strip_escapes(input), *want, "{input:?}");
        }
    }

    #[test]
    fn cursors_round_trip_and_bad_ones_are_invalid_input() {
        let cursor = OutputCursor {
            epoch: 0xdead_beef,
            offset: 42,
        };
        assert_eq!(cursor.to_string(), "00000000deadbeef:42");
        assert_eq!(cursor.to_string().parse::<OutputCursor>().unwrap(), cursor);
        for bad in [
            "",
            "42",
            "deadbeef:42",
            "00000000deadbeef:",
            "00000000deadbeeg:1",
            "x:y",
        ] {
            let error = bad.parse::<OutputCursor>().unwrap_err();
            assert_eq!(error.code(), "INVALID_INPUT", "{bad:?}");
        }
        assert_ne!(OutputCursor::new_epoch(), OutputCursor::new_epoch());
    }
}
