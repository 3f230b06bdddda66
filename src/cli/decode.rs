//! `tmux-engine decode`: a `tmux -C` transcript in, one JSON object per event
//! out (or one summary object with `--stats`).
//!
//! It drives [`ControlCodec`] synchronously over a reader, so it doubles as a
//! debugging tool for recorded streams and as the codec's end-to-end test.
//! The JSON fields are documented in `docs/decode-json.md`; keep the two in
//! step. Nothing here spawns tmux.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::BytesMut;
use serde_json::{Map, Value, json};
use tokio_util::codec::Decoder;

use tmux_engine::control::{ControlCodec, Event, Notification};
use tmux_engine::vocab::PaneId;

/// Bytes asked of the reader per read.
const READ_SIZE: usize = 64 * 1024;

/// The JSON object describing one event (see `docs/decode-json.md`).
///
/// Pane output is standard base64 (`data`), because it is bytes, not text.
/// Reply lines, text lines and free-text fields are strings with invalid
/// UTF-8 replaced by U+FFFD. Ids are their wire strings (`%0`, `@1`, `$2`).
pub fn event_json(event: &Event) -> Value {
    match event {
        Event::Notification(n) => notification_json(n),
        Event::Reply(r) => json!({
            "event": "reply",
            "number": r.number,
            "time": r.time,
            "flags": r.flags,
            "ok": r.ok,
            "lines": r.lines.iter().map(|l| lossy(l)).collect::<Vec<_>>(),
        }),
        Event::Text(line) => json!({ "event": "text", "line": lossy(line) }),
        Event::Malformed(e) => json!({
            "event": "error",
            "kind": e.kind_name(),
            "message": e.to_string(),
            "line": lossy(&e.line),
        }),
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn notification_json(n: &Notification) -> Value {
    let event = n.name();
    match n {
        Notification::Output { pane, data } => json!({
            "event": event, "pane": pane.to_string(), "data": STANDARD.encode(data),
        }),
        Notification::ExtendedOutput { pane, age_ms, data } => json!({
            "event": event, "pane": pane.to_string(), "age_ms": age_ms,
            "data": STANDARD.encode(data),
        }),
        Notification::Pause { pane }
        | Notification::Continue { pane }
        | Notification::PaneModeChanged { pane } => {
            json!({ "event": event, "pane": pane.to_string() })
        }
        Notification::LayoutChange {
            window,
            layout,
            visible_layout,
            flags,
        } => json!({
            "event": event, "window": window.to_string(), "layout": layout.to_string(),
            "visible_layout": visible_layout.to_string(), "flags": flags,
        }),
        Notification::WindowAdd { window }
        | Notification::UnlinkedWindowAdd { window }
        | Notification::WindowClose { window }
        | Notification::UnlinkedWindowClose { window } => {
            json!({ "event": event, "window": window.to_string() })
        }
        Notification::WindowRenamed { window, name }
        | Notification::UnlinkedWindowRenamed { window, name } => {
            json!({ "event": event, "window": window.to_string(), "name": name })
        }
        Notification::WindowPaneChanged { window, pane } => json!({
            "event": event, "window": window.to_string(), "pane": pane.to_string(),
        }),
        Notification::SessionChanged { session, name }
        | Notification::SessionRenamed { session, name } => {
            json!({ "event": event, "session": session.to_string(), "name": name })
        }
        Notification::ClientSessionChanged {
            client,
            session,
            name,
        } => json!({
            "event": event, "client": client, "session": session.to_string(), "name": name,
        }),
        Notification::ClientDetached { client } => json!({ "event": event, "client": client }),
        Notification::SessionWindowChanged { session, window } => json!({
            "event": event, "session": session.to_string(), "window": window.to_string(),
        }),
        Notification::SessionsChanged => json!({ "event": event }),
        Notification::SubscriptionChanged {
            name,
            session,
            window,
            index,
            pane,
            value,
        } => json!({
            "event": event,
            "name": name,
            "session": session.to_string(),
            "window": window.map(|w| w.to_string()),
            "index": index,
            "pane": pane.map(|p| p.to_string()),
            "value": lossy(value),
        }),
        Notification::Exit { reason } => json!({ "event": event, "reason": reason }),
        Notification::ConfigError { text } | Notification::Message { text } => {
            json!({ "event": event, "text": text })
        }
        Notification::PasteBufferChanged { name } | Notification::PasteBufferDeleted { name } => {
            json!({ "event": event, "name": name })
        }
        Notification::Unknown { name, args } => json!({
            "event": "unknown", "name": name, "args": lossy(args),
        }),
        // A notification the library learned after this printer: its name
        // at least (the enum is non-exhaustive).
        _ => json!({ "event": event }),
    }
}

/// Decodes a control-mode stream from `input` and writes JSON lines to
/// `output`: one object per event, or with `stats` a single summary object
/// `{"events":{NAME:N,...},"output_bytes":{PANE:N,...},"errors":N}`.
///
/// Malformed lines are printed as `error` events (and counted in `errors`)
/// and decoding goes on; the command only fails on I/O.
///
/// # Errors
/// Any error reading `input` or writing `output`.
pub fn run_decode(mut input: impl Read, output: impl Write, stats: bool) -> io::Result<()> {
    let mut out = io::BufWriter::new(output);
    let mut sink = if stats {
        Sink::Stats(Stats::default())
    } else {
        Sink::Lines
    };
    let mut codec = ControlCodec::new();
    let mut buf = BytesMut::with_capacity(READ_SIZE);
    loop {
        // Read straight into the codec's buffer: no second copy.
        let start = buf.len();
        buf.resize(start + READ_SIZE, 0);
        let read = input.read(&mut buf[start..]);
        buf.truncate(start + *read.as_ref().unwrap_or(&0));
        let n = match read {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            break;
        }
        while let Some(event) = codec.decode(&mut buf)? {
            sink.take(&event, &mut out)?;
        }
    }
    while let Some(event) = codec.decode_eof(&mut buf)? {
        sink.take(&event, &mut out)?;
    }
    if let Sink::Stats(stats) = sink {
        serde_json::to_writer(&mut out, &stats.to_json())?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

enum Sink {
    Lines,
    Stats(Stats),
}

impl Sink {
    fn take(&mut self, event: &Event, out: &mut impl Write) -> io::Result<()> {
        match self {
            Sink::Lines => write_line(&event_json(event), out),
            Sink::Stats(stats) => {
                stats.count(event);
                Ok(())
            }
        }
    }
}

/// Writes `value` as one line with its `event` key first, so a reader can
/// dispatch on the first field (serde_json's map sorts keys otherwise).
fn write_line(value: &Value, out: &mut impl Write) -> io::Result<()> {
    let Value::Object(map) = value else {
        serde_json::to_writer(&mut *out, value)?;
        return out.write_all(b"\n");
    };
    out.write_all(b"{")?;
    let mut first = true;
    let event = map.get_key_value("event");
    for (key, val) in event
        .into_iter()
        .chain(map.iter().filter(|(k, _)| *k != "event"))
    {
        if !first {
            out.write_all(b",")?;
        }
        first = false;
        serde_json::to_writer(&mut *out, key)?;
        out.write_all(b":")?;
        serde_json::to_writer(&mut *out, val)?;
    }
    out.write_all(b"}\n")
}

#[derive(Default)]
struct Stats {
    events: BTreeMap<String, u64>,
    output_bytes: BTreeMap<PaneId, u64>,
    errors: u64,
}

impl Stats {
    fn count(&mut self, event: &Event) {
        let name = match event {
            Event::Notification(n) => {
                if let Notification::Output { pane, data }
                | Notification::ExtendedOutput { pane, data, .. } = n
                {
                    *self.output_bytes.entry(*pane).or_default() += data.len() as u64;
                }
                if let Notification::Unknown { .. } = n {
                    "unknown"
                } else {
                    n.name()
                }
            }
            Event::Reply(_) => "reply",
            Event::Text(_) => "text",
            Event::Malformed(_) => {
                self.errors += 1;
                return;
            }
        };
        match self.events.get_mut(name) {
            Some(n) => *n += 1,
            None => {
                self.events.insert(name.to_owned(), 1);
            }
        }
    }

    fn to_json(&self) -> Value {
        let events: Map<String, Value> = self
            .events
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        let output_bytes: Map<String, Value> = self
            .output_bytes
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        json!({ "events": events, "output_bytes": output_bytes, "errors": self.errors })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(input: &[u8]) -> String {
        let mut out = Vec::new();
        run_decode(input, &mut out, false).expect("in-memory I/O");
        String::from_utf8(out).expect("JSON is UTF-8")
    }

    #[test]
    fn one_line_per_event_with_event_first() {
        let got = decode(
            b"%output %0 hi\\015\\012\n%window-add @1\n%subscription-changed s $0 - - - : v\n%noop x\nbare\n%window-add x\n",
        );
        insta::assert_snapshot!(got, @r#"
        {"event":"output","data":"aGkNCg==","pane":"%0"}
        {"event":"window-add","window":"@1"}
        {"event":"subscription-changed","index":null,"name":"s","pane":null,"session":"$0","value":"v","window":null}
        {"event":"unknown","args":"x","name":"noop"}
        {"event":"text","line":"bare"}
        {"event":"error","kind":"bad-id","line":"%window-add x","message":"malformed %window-add line: bad window id in \"%window-add x\""}
        "#);
    }

    #[test]
    fn stats_summary() {
        let mut out = Vec::new();
        run_decode(
            &b"%output %0 ab\n%output %10 c\n%output %0 d\n%begin 1 2 1\n%end 1 2 1\n%bad x\n%window-add x\n"[..],
            &mut out,
            true,
        )
        .expect("in-memory I/O");
        insta::assert_snapshot!(String::from_utf8_lossy(&out), @r#"{"errors":1,"events":{"output":3,"reply":1,"unknown":1},"output_bytes":{"%0":3,"%10":1}}"#);
    }

    #[test]
    fn reads_in_small_pieces() {
        /// A reader that hands out one byte per call.
        struct Trickle<'a>(&'a [u8]);
        impl Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let Some((&b, rest)) = self.0.split_first() else {
                    return Ok(0);
                };
                buf[0] = b;
                self.0 = rest;
                Ok(1)
            }
        }
        let input = b"%begin 1 2 1\nbody\n%end 1 2 1\n%exit";
        let mut out = Vec::new();
        run_decode(Trickle(input), &mut out, false).expect("in-memory I/O");
        assert_eq!(String::from_utf8_lossy(&out), decode(input));
    }
}
