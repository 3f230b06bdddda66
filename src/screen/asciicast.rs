//! asciicast v2 recordings: the format `asciinema play` and
//! asciinema-player read (<https://docs.asciinema.org/manual/asciicast/v2/>).
//!
//! A recording is one JSON header line, then one JSON array per event:
//! `[seconds, "o" | "i" | "r" | "m", data]` (output, input, resize to
//! `COLSxROWS`, marker). Event data is a JSON string, so bytes are carried
//! as UTF-8: a character split across two writes is held back until it is
//! whole (as asciinema's own recorder does), and bytes that are not UTF-8
//! at all become U+FFFD, which players render the same way a terminal
//! would.
//!
//! The writer is bounded: once the next event would pass its byte limit it
//! writes one marker saying so and drops the rest, because a recording
//! kept for a failing test or an agent's log must never fill the disk.
//! [`Recording::parse`] reads one back and [`Recording::final_screen`]
//! replays it into the screen model, which is how tests check a recording
//! against the terminal it came from.

use std::fmt;
use std::io::{self, Write};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::Emulator;
use super::Screen;
use crate::vocab::Size;

/// What the header line of a recording says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The terminal's size when recording began.
    pub size: Size,
    /// When recording began, in seconds since the Unix epoch.
    pub timestamp: Option<u64>,
    /// A title players show.
    pub title: Option<String>,
    /// The `TERM` the program saw, written as the header's `env.TERM`.
    pub term: Option<String>,
}

impl Header {
    /// A header for a terminal of `size`, stamped with the current time.
    pub fn now(size: Size) -> Header {
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .map(|since| since.as_secs());
        Header {
            size,
            timestamp,
            title: None,
            term: None,
        }
    }

    fn to_json(&self) -> Value {
        let mut header = json!({
            "version": 2,
            "width": self.size.cols,
            "height": self.size.rows,
        });
        if let Some(timestamp) = self.timestamp {
            header["timestamp"] = json!(timestamp);
        }
        if let Some(title) = &self.title {
            header["title"] = json!(title);
        }
        if let Some(term) = &self.term {
            header["env"] = json!({ "TERM": term });
        }
        header
    }
}

/// The kind of one recorded event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// Bytes the program printed (`"o"`).
    Output,
    /// Bytes typed into the terminal (`"i"`).
    Input,
    /// The terminal was resized; the data is `COLSxROWS` (`"r"`).
    Resize,
    /// A named point in the recording (`"m"`).
    Marker,
}

impl EventKind {
    /// The code the format uses for this kind.
    pub fn code(self) -> &'static str {
        match self {
            EventKind::Output => "o",
            EventKind::Input => "i",
            EventKind::Resize => "r",
            EventKind::Marker => "m",
        }
    }

    fn of(code: &str) -> Option<EventKind> {
        Some(match code {
            "o" => EventKind::Output,
            "i" => EventKind::Input,
            "r" => EventKind::Resize,
            "m" => EventKind::Marker,
            _ => return None,
        })
    }
}

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

/// One event read back from a recording.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Seconds since recording began.
    pub time: f64,
    /// What happened.
    pub kind: EventKind,
    /// Its data: text for output and input, `COLSxROWS` for a resize.
    pub data: String,
}

/// A recording read back by [`Recording::parse`].
#[derive(Clone, Debug, PartialEq)]
pub struct Recording {
    /// The header line.
    pub header: Header,
    /// Every event, in order.
    pub events: Vec<Event>,
}

/// The largest recording [`Recording::parse`] reads (64 MiB): a player
/// holds every event in memory, and a 10^7-event cast once cost 1.06 GiB
/// and 11 s with no bound.
pub const MAX_BYTES: u64 = 64 << 20;

/// The most events [`Recording::parse`] reads (one million: about
/// 100 MB held and a second to parse).
pub const MAX_EVENTS: usize = 1_000_000;

/// Why a recording could not be read: the line (1-based) and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseRecordingError {
    /// The line that is wrong, 1-based.
    pub line: usize,
    /// What is wrong with it.
    pub reason: String,
}

impl fmt::Display for ParseRecordingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "asciicast line {}: {}", self.line, self.reason)
    }
}

impl std::error::Error for ParseRecordingError {}

#[derive(Deserialize)]
struct HeaderLine {
    width: u16,
    height: u16,
    timestamp: Option<u64>,
    title: Option<String>,
    env: Option<serde_json::Map<String, Value>>,
}

/// The header of asciicast v3 (what asciinema 3 writes): the size and
/// terminal type under `term`.
#[derive(Deserialize)]
struct HeaderV3 {
    term: TermV3,
    timestamp: Option<u64>,
    title: Option<String>,
}

#[derive(Deserialize)]
struct TermV3 {
    cols: u16,
    rows: u16,
    #[serde(rename = "type")]
    kind: Option<String>,
}

#[derive(Deserialize)]
struct VersionOnly {
    version: Value,
}

impl Recording {
    /// Reads a recording, checking every line: an asciicast v2 header
    /// (`width`, `height`) or a v3 one (`term.cols`, `term.rows`), then
    /// events with a known kind and string data, their times never going
    /// back (v2: since the start; v3: since the event before, `#` lines
    /// are comments and exit events are skipped). Version 1 (one JSON
    /// document) is refused by name, and so is a recording past the
    /// budget of [`MAX_BYTES`] or [`MAX_EVENTS`].
    pub fn parse(text: &str) -> Result<Recording, ParseRecordingError> {
        let mut lines = text.lines().enumerate();
        let bad = |line: usize, reason: String| ParseRecordingError {
            line: line + 1,
            reason,
        };
        if text.len() as u64 > MAX_BYTES {
            return Err(bad(
                0,
                format!(
                    "the recording is {} bytes, past the budget of {MAX_BYTES} bytes: \
                     cut it (`head -n`) or split it",
                    text.len()
                ),
            ));
        }
        let (_, first) = lines
            .next()
            .ok_or_else(|| bad(0, "empty recording".to_owned()))?;
        let version = serde_json::from_str::<VersionOnly>(first)
            .map(|v| v.version)
            .map_err(|error| bad(0, format!("not an asciicast header: {error}")))?;
        let v3 = match version.as_u64() {
            Some(2) => false,
            Some(3) => true,
            Some(1) => {
                return Err(bad(
                    0,
                    "asciicast version 1 is not read (versions 2 and 3 are; \
                     `asciinema convert` makes a v2 file)"
                        .to_owned(),
                ));
            }
            _ => {
                return Err(bad(
                    0,
                    format!("asciicast version {version} is not read (versions 2 and 3 are)"),
                ));
            }
        };
        let header = if v3 {
            let head: HeaderV3 = serde_json::from_str(first)
                .map_err(|error| bad(0, format!("not an asciicast v3 header: {error}")))?;
            Header {
                size: Size::new(head.term.cols, head.term.rows)
                    .map_err(|error| bad(0, error.to_string()))?,
                timestamp: head.timestamp,
                title: head.title,
                term: head.term.kind,
            }
        } else {
            let head: HeaderLine = serde_json::from_str(first)
                .map_err(|error| bad(0, format!("not an asciicast v2 header: {error}")))?;
            Header {
                size: Size::new(head.width, head.height)
                    .map_err(|error| bad(0, error.to_string()))?,
                timestamp: head.timestamp,
                title: head.title,
                term: head
                    .env
                    .as_ref()
                    .and_then(|env| env.get("TERM"))
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            }
        };
        let mut events = Vec::new();
        let mut last = 0.0;
        for (index, line) in lines {
            if line.is_empty() || (v3 && line.starts_with('#')) {
                continue;
            }
            if events.len() == MAX_EVENTS {
                return Err(bad(
                    index,
                    format!(
                        "past the budget of {MAX_EVENTS} events: cut the recording or split it"
                    ),
                ));
            }
            let (time, code, data): (f64, String, String) = serde_json::from_str(line)
                .map_err(|error| bad(index, format!("not an event: {error}")))?;
            let time = if v3 {
                if time.is_nan() || time < 0.0 {
                    return Err(bad(index, format!("interval {time} is negative")));
                }
                last + time
            } else {
                if time.is_nan() || time < last {
                    return Err(bad(index, format!("time {time} goes back from {last}")));
                }
                time
            };
            last = time;
            if v3 && code == "x" {
                // The exit status: nothing a player shows.
                continue;
            }
            let kind =
                EventKind::of(&code).ok_or_else(|| bad(index, format!("unknown kind {code:?}")))?;
            events.push(Event { time, kind, data });
        }
        Ok(Recording { header, events })
    }

    /// Everything the program printed, in order.
    pub fn output(&self) -> String {
        self.events
            .iter()
            .filter(|event| event.kind == EventKind::Output)
            .map(|event| event.data.as_str())
            .collect()
    }

    /// The screen a player shows at the end: the output events replayed
    /// into the screen model, following resizes.
    pub fn final_screen(&self) -> Screen {
        let mut emulator = Emulator::new(self.header.size, 0);
        for event in &self.events {
            match event.kind {
                EventKind::Output => emulator.process(event.data.as_bytes()),
                EventKind::Resize => {
                    if let Some(size) = parse_size(&event.data) {
                        emulator.set_size(size);
                    }
                }
                EventKind::Input | EventKind::Marker => {}
            }
        }
        emulator.screen()
    }
}

fn parse_size(data: &str) -> Option<Size> {
    let (cols, rows) = data.split_once('x')?;
    Size::new(cols.parse().ok()?, rows.parse().ok()?).ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A cast past the event budget is refused at the first event past
    /// it (a 10^7-event cast once cost 1.06 GiB and 11 s); one at the
    /// budget is read.
    #[test]
    fn casts_past_the_event_budget_are_refused() {
        let header = "{\"version\": 2, \"width\": 10, \"height\": 3}\n";
        let mut text = String::with_capacity(header.len() + 12 * (MAX_EVENTS + 1));
        text.push_str(header);
        for _ in 0..MAX_EVENTS {
            text.push_str("[0,\"o\",\"\"]\n");
        }
        assert_eq!(Recording::parse(&text).unwrap().events.len(), MAX_EVENTS);
        text.push_str("[0,\"o\",\"\"]\n");
        let error = Recording::parse(&text).unwrap_err();
        assert_eq!(error.line, MAX_EVENTS + 2);
        assert!(error.reason.contains("budget"), "{error}");
    }

    fn size(cols: u16, rows: u16) -> Size {
        Size::new(cols, rows).unwrap()
    }

    fn record(limit: u64, write: impl FnOnce(&mut Writer<Vec<u8>>)) -> (String, bool) {
        let header = Header {
            size: size(20, 3),
            timestamp: Some(1_700_000_000),
            title: Some("t".to_owned()),
            term: Some("xterm-256color".to_owned()),
        };
        let mut writer = Writer::new(Vec::new(), &header, limit).unwrap();
        write(&mut writer);
        let truncated = writer.truncated();
        (
            String::from_utf8(writer.finish().unwrap()).unwrap(),
            truncated,
        )
    }

    #[test]
    fn a_recording_reads_back_and_replays_to_the_screen() {
        let (text, truncated) = record(1 << 20, |w| {
            w.output(Duration::from_millis(1), b"hello\r\n").unwrap();
            w.input(Duration::from_millis(2), b"ls\r").unwrap();
            w.resize(Duration::from_millis(3), size(30, 4)).unwrap();
            w.output(Duration::from_millis(4), b"\x1b[31mred\x1b[0m")
                .unwrap();
        });
        assert!(!truncated);
        let recording = Recording::parse(&text).unwrap();
        assert_eq!(recording.header.size, size(20, 3));
        assert_eq!(recording.header.term.as_deref(), Some("xterm-256color"));
        let kinds: Vec<_> = recording.events.iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            [
                EventKind::Output,
                EventKind::Input,
                EventKind::Resize,
                EventKind::Output
            ]
        );
        assert_eq!(recording.events[2].data, "30x4");
        let screen = recording.final_screen();
        assert_eq!(screen.size(), size(30, 4));
        assert_eq!(screen.row(0), Some("hello"));
        assert_eq!(screen.row(1), Some("red"));
        assert_eq!(
            screen.cell(1, 0).unwrap().attributes.fg,
            crate::screen::Color::Indexed(1)
        );
    }

    #[test]
    fn a_character_split_across_writes_is_kept_whole_and_bad_bytes_are_replaced() {
        let euro = "€".as_bytes();
        let (text, _) = record(1 << 20, |w| {
            w.output(Duration::ZERO, &euro[..1]).unwrap();
            w.output(Duration::ZERO, &euro[1..]).unwrap();
            w.output(Duration::ZERO, b"a\xffb").unwrap();
        });
        let recording = Recording::parse(&text).unwrap();
        // The first write held its byte back, so no event was written.
        assert_eq!(recording.events.len(), 2);
        assert_eq!(recording.output(), "€a\u{fffd}b");
    }

    #[test]
    fn the_limit_ends_the_recording_with_one_marker() {
        let (text, truncated) = record(600, |w| {
            for i in 0..100 {
                w.output(Duration::from_millis(i), b"0123456789").unwrap();
            }
        });
        assert!(truncated);
        assert!(text.len() <= 600, "{} bytes", text.len());
        let recording = Recording::parse(&text).unwrap();
        let last = recording.events.last().unwrap();
        assert_eq!(last.kind, EventKind::Marker);
        assert!(last.data.contains("600 bytes"), "{}", last.data);
        assert_eq!(
            recording
                .events
                .iter()
                .filter(|e| e.kind == EventKind::Marker)
                .count(),
            1
        );
    }

    #[test]
    fn a_v3_recording_reads_with_relative_times() {
        let text = "{\"version\":3,\"term\":{\"cols\":10,\"rows\":2,\"type\":\"xterm-256color\"},\"timestamp\":1700000000}\n\
                    # a comment\n\
                    [0.5,\"o\",\"hi\"]\n\
                    [0.25,\"r\",\"12x3\"]\n\
                    [0.25,\"o\",\"\\r\\nyo\"]\n\
                    [0.1,\"x\",\"0\"]\n";
        let rec = Recording::parse(text).expect("v3");
        assert_eq!(rec.header.size, size(10, 2));
        assert_eq!(rec.header.term.as_deref(), Some("xterm-256color"));
        let times: Vec<f64> = rec.events.iter().map(|e| e.time).collect();
        assert_eq!(times, [0.5, 0.75, 1.0]);
        let screen = rec.final_screen();
        assert_eq!(screen.size(), size(12, 3));
        assert_eq!(screen.text(), "hi\nyo");
        let bad = "{\"version\":3,\"term\":{\"cols\":10,\"rows\":2}}\n[-1,\"o\",\"a\"]";
        assert!(
            Recording::parse(bad)
                .unwrap_err()
                .reason
                .contains("negative")
        );
    }

    #[test]
    fn bad_recordings_name_the_line() {
        let header = r#"{"version":2,"width":10,"height":2}"#;
        for (text, line, needle) in [
            ("", 1, "empty"),
            (
                r#"{"version":1,"width":10,"height":2}"#,
                1,
                "version 1 is not read",
            ),
            (
                r#"{"version":2,"term":{"cols":10,"rows":2}}"#,
                1,
                "v2 header",
            ),
            (
                &format!("{header}\n[1.0,\"x\",\"a\"]") as &str,
                2,
                "unknown kind",
            ),
            (
                &format!("{header}\n[2.0,\"o\",\"a\"]\n[1.0,\"o\",\"b\"]"),
                3,
                "goes back",
            ),
            (&format!("{header}\n[1.0,\"o\"]"), 2, "not an event"),
        ] {
            let error = Recording::parse(text).unwrap_err();
            assert_eq!(error.line, line, "{text}: {error}");
            assert!(error.reason.contains(needle), "{text}: {error}");
        }
    }
}
