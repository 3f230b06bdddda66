//! The WebSocket protocol's grammar, sans IO: the attach query
//! (`transport=..&read_only=..&since=STREAM:OFFSET&token=..`), the
//! client's text frames, and the server's text frames. Nothing here touches
//! a socket; `ws/` applies what these functions return.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::attach::{Hello, HistoryPage, Transport};
use crate::registry::{OutputCursor, TerminalStatus};
use crate::vocab::{ExitStatus, Size};
use crate::{Error, Result};

/// WebSocket close codes of the attach protocol.
pub mod close {
    /// The server is shutting down, or the client stopped answering
    /// pings; reconnect later.
    pub const GOING_AWAY: u16 = 1001;
    /// A WebSocket protocol violation (bad framing, an unmasked or
    /// reserved frame, ...).
    pub const PROTOCOL_ERROR: u16 = 1002;
    /// A text frame that is not UTF-8.
    pub const INVALID_DATA: u16 = 1007;
    /// The client broke a policy: its write budget is spent (it sends
    /// pings or input but does not read).
    pub const POLICY: u16 = 1008;
    /// A frame larger than the bridge accepts.
    pub const TOO_BIG: u16 = 1009;
    /// The bridge failed for a reason of its own (retry may help).
    pub const INTERNAL: u16 = 1011;
    /// The server is draining to restart (SIGTERM): the terminal keeps
    /// running; reconnect, to this address, once the next serve answers.
    pub const SERVICE_RESTART: u16 = 1012;
    /// The reason sent with [`SERVICE_RESTART`], which the page shows.
    pub const RESTARTING: &str = "this host is restarting; reconnecting\u{2026}";
    /// Malformed query or client frame.
    pub const BAD_REQUEST: u16 = 4400;
    /// No token, or a wrong one; or, on a live session, its credential
    /// ended (its link revoked or expired, its session signed out).
    pub const UNAUTHORIZED: u16 = 4401;
    /// The `Origin` is neither the page's own nor an allowed one.
    pub const FORBIDDEN_ORIGIN: u16 = 4403;
    /// No such terminal, or it is gone: do not reconnect.
    pub const GONE: u16 = 4404;
}

/// The attach query, parsed: everything but the token.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AttachQuery {
    /// `transport=control|pty` (default control).
    pub transport: Transport,
    /// `read_only=true|false` (default false).
    pub read_only: bool,
    /// `since=STREAM:OFFSET`: where the client left off (an output cursor:
    /// the hello's `stream`, the offset after the last byte received).
    pub since: Option<OutputCursor>,
    /// `cols=C&rows=R` (both or neither): the client's size, applied
    /// before its first snapshot is taken (a writable viewer's; one
    /// snapshot at the right size instead of one, a resize and another).
    pub size: Option<Size>,
}

/// `transport=control&read_only=true&since=00ab..:1234&token=..`: the
/// token is the authenticator's business and skipped here; an unknown key
/// or a bad value is an error naming it.
///
/// # Errors
/// `INVALID_INPUT` naming the bad pair.
pub fn attach_query(query: &str) -> Result<AttachQuery> {
    let mut parsed = AttachQuery::default();
    let (mut cols, mut rows) = (None, None);
    for (key, value) in form_pairs(query) {
        match key.as_str() {
            "cols" => cols = Some(dimension(&key, &value)?),
            "rows" => rows = Some(dimension(&key, &value)?),
            "transport" => parsed.transport = transport(&value)?,
            "read_only" => parsed.read_only = boolean(&key, &value)?,
            "since" => parsed.since = Some(since(&value)?),
            "token" => {}
            _ => {
                return Err(Error::InvalidInput(format!(
                    "unknown query parameter {key:?}"
                )));
            }
        }
    }
    parsed.size = match (cols, rows) {
        (None, None) => None,
        (Some(cols), Some(rows)) => {
            let size = Size { cols, rows };
            size.check()?;
            Some(size)
        }
        _ => {
            return Err(Error::InvalidInput("cols and rows go together".to_owned()));
        }
    };
    Ok(parsed)
}

/// A column or row count.
fn dimension(key: &str, value: &str) -> Result<u16> {
    value
        .parse()
        .map_err(|_| Error::InvalidInput(format!("{key} {value:?} is not a count")))
}

/// `control` or `pty`.
fn transport(value: &str) -> Result<Transport> {
    match value {
        "control" => Ok(Transport::Control),
        "pty" => Ok(Transport::Pty),
        _ => Err(Error::InvalidInput(format!(
            "transport {value:?} is not control or pty"
        ))),
    }
}

/// `true` or `false`.
fn boolean(key: &str, value: &str) -> Result<bool> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(Error::InvalidInput(format!(
            "{key} {value:?} is not true or false"
        ))),
    }
}

/// `STREAM:OFFSET`, the stream as the hello gave it (16 hex digits): an
/// output cursor, as `read since` takes it.
fn since(value: &str) -> Result<OutputCursor> {
    value
        .parse()
        .map_err(|_| Error::InvalidInput(format!("since {value:?} is not STREAM:OFFSET")))
}

/// The `key=value` pairs of a query string, percent-decoded (`+` is a
/// space, as in forms).
pub fn form_pairs(query: &str) -> impl Iterator<Item = (String, String)> + '_ {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(key), percent_decode(value))
        })
}

/// Decodes `%XX` and `+`; a malformed escape is kept as written.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => match text
                .get(i + 1..i + 3)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
            {
                Some(byte) => {
                    out.push(byte);
                    i += 2;
                }
                None => out.push(b'%'),
            },
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A text frame from the client.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ClientFrame {
    /// `{"type":"resize","cols":C,"rows":R}`.
    Resize {
        /// Columns.
        cols: u16,
        /// Rows.
        rows: u16,
    },
    /// `{"type":"history","before":OFFSET,"max":BYTES}`: the page of past
    /// output ending at `before` (an offset of the hello's stream), at
    /// most `max` bytes (default and limit 4 MiB).
    History {
        /// The offset the page ends at (exclusive).
        before: u64,
        /// The most bytes wanted.
        #[serde(default)]
        max: Option<u64>,
    },
}

/// One client text frame.
///
/// # Errors
/// `INVALID_INPUT` carrying serde's complaint and the start of the frame.
pub fn client_frame(text: &str) -> Result<ClientFrame> {
    serde_json::from_str(text).map_err(|e| {
        let shown: String = text.chars().take(80).collect();
        Error::InvalidInput(format!("frame {shown:?}: {e}"))
    })
}

impl ClientFrame {
    /// The size a resize frame asks for (`None` for any other frame).
    pub fn size(&self) -> Option<Size> {
        match *self {
            ClientFrame::Resize { cols, rows } => Some(Size { cols, rows }),
            ClientFrame::History { .. } => None,
        }
    }
}

/// `{"type":"typing","who":[…]}`: the others typing into the terminal
/// now (names sorted, each once; empty once nobody else is).
pub fn typing(who: &[String]) -> Value {
    json!({ "type": "typing", "who": who })
}

/// `{"type":"hello",...}`: the first frame of every attach.
pub fn hello(hello: &Hello) -> Value {
    json!({
        "type": "hello",
        "id": hello.id,
        "name": hello.name,
        "transport": match hello.transport {
            Transport::Control => "control",
            Transport::Pty => "pty",
        },
        "read_only": hello.read_only,
        "cols": hello.size.cols,
        "rows": hello.size.rows,
        // The cursor's two halves, as `since` takes them back.
        "stream": hello.cursor.map(|at| format!("{:016x}", at.epoch)),
        "offset": hello.cursor.map(|at| at.offset),
    })
}

/// `{"type":"snapshot","offset":N}`; the repaint follows as one binary
/// frame.
pub fn snapshot(offset: u64) -> Value {
    json!({"type": "snapshot", "offset": offset})
}

/// `{"type":"history","stream":"…","from":A,"to":B,"first":F}`; the
/// page's bytes (`B - A` of them, exactly as the program printed them)
/// follow as one binary frame. `first` is the oldest offset a page can
/// start at now: `from == first` means there is nothing older.
pub fn history(page: &HistoryPage) -> Value {
    json!({
        "type": "history",
        "stream": format!("{:016x}", page.epoch),
        "from": page.from,
        "to": page.to,
        "first": page.first,
    })
}

/// `{"type":"resize","cols":C,"rows":R}`.
pub fn resize(size: Size) -> Value {
    json!({"type": "resize", "cols": size.cols, "rows": size.rows})
}

/// `{"type":"exit","status":{..}}`, the status as a snapshot shows it.
pub fn exit(status: ExitStatus) -> Value {
    json!({"type": "exit", "status": TerminalStatus::Exited { exit: status }})
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    #[test]
    fn queries() {
        let ok = [
            ("", AttachQuery::default()),
            ("token=abc", AttachQuery::default()),
            (
                "transport=pty&read_only=true",
                AttachQuery {
                    transport: Transport::Pty,
                    read_only: true,
                    since: None,
                    size: None,
                },
            ),
            (
                "cols=120&rows=40",
                AttachQuery {
                    size: Some(Size {
                        cols: 120,
                        rows: 40,
                    }),
                    ..AttachQuery::default()
                },
            ),
            (
                "since=00000000000000ff%3A42",
                AttachQuery {
                    since: Some(OutputCursor {
                        epoch: 255,
                        offset: 42,
                    }),
                    ..AttachQuery::default()
                },
            ),
        ];
        for (query, want) in ok {
            assert_eq!(attach_query(query).unwrap(), want, "{query}");
        }
        for bad in [
            "transport=ssh",
            "read_only=yes",
            "since=42",
            "since=zz:1",
            "since=ff:-1",
            "colour=red",
            "cols=80",
            "rows=24",
            "cols=x&rows=24",
            "cols=0&rows=24",
            "cols=70000&rows=24",
        ] {
            let error = attach_query(bad).unwrap_err();
            assert_eq!(error.code(), ErrorCode::InvalidInput, "{bad}");
        }
    }

    #[test]
    fn percent_decoding() {
        for (raw, want) in [
            ("a%20b", "a b"),
            ("a+b", "a b"),
            ("%zz", "%zz"),
            ("%4", "%4"),
        ] {
            assert_eq!(percent_decode(raw), want);
        }
    }

    #[test]
    fn client_frames() {
        assert_eq!(
            client_frame(r#"{"type":"resize","cols":100,"rows":30}"#).unwrap(),
            ClientFrame::Resize {
                cols: 100,
                rows: 30
            }
        );
        assert_eq!(
            client_frame(r#"{"type":"history","before":1234}"#).unwrap(),
            ClientFrame::History {
                before: 1234,
                max: None
            }
        );
        assert_eq!(
            client_frame(r#"{"type":"history","before":0,"max":65536}"#).unwrap(),
            ClientFrame::History {
                before: 0,
                max: Some(65536)
            }
        );
        assert_eq!(
            client_frame(r#"{"type":"history","before":9}"#)
                .unwrap()
                .size(),
            None
        );
        for bad in [
            "{",
            r#"{"type":"history"}"#,
            r#"{"type":"history","before":-1}"#,
            r#"{"type":"history","before":1,"since":2}"#,
            r#"{"type":"resize","cols":"x","rows":1}"#,
            r#"{"type":"resize","cols":70000,"rows":1}"#,
            r#"{"type":"paste"}"#,
            r#"{"type":"resize","cols":1,"rows":1,"extra":1}"#,
        ] {
            assert_eq!(
                client_frame(bad).unwrap_err().code(),
                ErrorCode::InvalidInput
            );
        }
    }

    #[test]
    fn history_frames() {
        let page = HistoryPage {
            epoch: 255,
            from: 10,
            to: 30,
            first: 0,
            bytes: bytes::Bytes::from_static(b"x"),
        };
        assert_eq!(
            history(&page),
            json!({"type": "history", "stream": "00000000000000ff", "from": 10, "to": 30, "first": 0})
        );
    }
}
