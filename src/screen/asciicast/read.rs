//! Reading a recording back (asciicast v2, and v3 with relative times)
//! within a byte and event budget, and replaying it into the screen model.
//! Apart from writing (`write.rs`) because it takes untrusted files (a
//! tape's casts, a user's) and so carries the bounds and the errors naming
//! a line.

use std::fmt;

use serde::Deserialize;
use serde_json::Value;

use super::{EventKind, Header};
use crate::screen::{Emulator, Screen};
use crate::vocab::Size;

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
