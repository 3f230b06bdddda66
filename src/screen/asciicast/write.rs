//! Writing a recording as it happens: events stamped by the caller's
//! clock, characters split across writes held until whole, and the byte
//! limit ended by one marker. Apart from reading (`read.rs`) because a
//! writer runs in the stream's path (the relay, a follower, the fixture)
//! and must stay small and bounded; it never parses.

use std::fmt;
use std::io::{self, Write};
use std::time::Duration;

use serde_json::json;

use super::{EventKind, Header};
use crate::vocab::Size;

/// Writes an asciicast v2 recording to `W`, at most `limit` bytes of it.
///
/// Times are given by the caller (time since recording began), so one
/// clock can stamp both what was typed and what was printed.
pub(crate) struct Writer<W: Write> {
    out: W,
    limit: u64,
    written: u64,
    truncated: bool,
    /// The incomplete UTF-8 sequence at the end of the last output write.
    output_tail: Vec<u8>,
    /// The same for input.
    input_tail: Vec<u8>,
}

impl<W: Write> fmt::Debug for Writer<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Writer")
            .field("limit", &self.limit)
            .field("written", &self.written)
            .field("truncated", &self.truncated)
            .finish_non_exhaustive()
    }
}

/// Room kept under the limit for the marker that says it was reached.
const MARKER_ROOM: u64 = 128;

impl<W: Write> Writer<W> {
    /// Starts a recording on `out` by writing its header; at most `limit`
    /// bytes are written in all (the header always is).
    pub fn new(mut out: W, header: &Header, limit: u64) -> io::Result<Writer<W>> {
        let mut line = header.to_json().to_string();
        line.push('\n');
        out.write_all(line.as_bytes())?;
        Ok(Writer {
            out,
            limit,
            written: line.len() as u64,
            truncated: false,
            output_tail: Vec::new(),
            input_tail: Vec::new(),
        })
    }

    /// Records bytes the program printed, `at` after recording began.
    pub fn output(&mut self, at: Duration, bytes: &[u8]) -> io::Result<()> {
        let text = take_text(&mut self.output_tail, bytes);
        self.event(at, EventKind::Output, &text)
    }

    /// Records bytes typed into the terminal.
    pub fn input(&mut self, at: Duration, bytes: &[u8]) -> io::Result<()> {
        let text = take_text(&mut self.input_tail, bytes);
        self.event(at, EventKind::Input, &text)
    }

    /// Records a resize.
    pub fn resize(&mut self, at: Duration, size: Size) -> io::Result<()> {
        self.event(
            at,
            EventKind::Resize,
            &format!("{}x{}", size.cols, size.rows),
        )
    }

    /// Records a marker (shown as a chapter by asciinema-player).
    pub fn marker(&mut self, at: Duration, label: &str) -> io::Result<()> {
        self.event(at, EventKind::Marker, label)
    }

    /// Whether events were dropped because the limit was reached.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// How many bytes have been written, header included.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The destination, as written so far (an incomplete UTF-8 character
    /// at the end of the output is not in it yet).
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// Flushes and hands back the destination.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }

    fn event(&mut self, at: Duration, kind: EventKind, data: &str) -> io::Result<()> {
        if self.truncated || data.is_empty() {
            return Ok(());
        }
        let line = event_line(at, kind, data);
        let room = self.limit.saturating_sub(MARKER_ROOM);
        if self.written + line.len() as u64 > room {
            self.truncated = true;
            let note = format!("recording truncated: its limit of {} bytes", self.limit);
            let marker = event_line(at, EventKind::Marker, &note);
            self.written += marker.len() as u64;
            return self.out.write_all(marker.as_bytes());
        }
        self.written += line.len() as u64;
        self.out.write_all(line.as_bytes())
    }
}

fn event_line(at: Duration, kind: EventKind, data: &str) -> String {
    // Microseconds, as asciinema writes them: enough to order keystrokes.
    let mut line = json!([(at.as_micros() as f64) / 1e6, kind.code(), data]).to_string();
    line.push('\n');
    line
}

/// Decodes `tail ++ bytes` as UTF-8, keeping an incomplete final sequence in
/// `tail` for the next call and replacing invalid bytes with U+FFFD.
fn take_text(tail: &mut Vec<u8>, bytes: &[u8]) -> String {
    tail.extend_from_slice(bytes);
    let mut text = String::new();
    let mut rest: &[u8] = tail;
    loop {
        match std::str::from_utf8(rest) {
            Ok(valid) => {
                text.push_str(valid);
                rest = &[];
                break;
            }
            Err(error) => {
                let (valid, after) = rest.split_at(error.valid_up_to());
                // Checked by from_utf8 just above.
                text.push_str(std::str::from_utf8(valid).unwrap_or_default());
                match error.error_len() {
                    Some(bad) => {
                        text.push(char::REPLACEMENT_CHARACTER);
                        rest = &after[bad..];
                    }
                    // An incomplete sequence at the very end: keep it.
                    None => {
                        rest = after;
                        break;
                    }
                }
            }
        }
    }
    let keep = rest.to_vec();
    *tail = keep;
    text
}
