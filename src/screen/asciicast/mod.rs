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
//!
//! This file is the format's vocabulary (the header, the event kinds);
//! writing a recording is `write.rs`, reading one back `read.rs`.

mod read;
mod write;

use serde_json::{Value, json};

pub use self::read::{Event, MAX_BYTES, MAX_EVENTS, ParseRecordingError, Recording};
pub(crate) use self::write::Writer;
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

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
