//! Helpers shared by the integration tests: fixtures and codec drivers.

use std::path::PathBuf;

use bytes::{Bytes, BytesMut};
use tmux_engine::control::{ControlCodec, Event, Notification, PaneId};
use tokio_util::codec::Decoder;

/// `fixtures/control/`, the recorded `tmux -C` transcripts.
pub fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/control")
}

/// Every `*.out` transcript, as (file name, bytes), sorted by name.
pub fn fixtures() -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(fixture_dir())
        .expect("fixtures/control exists")
        .map(|entry| entry.expect("readable fixture dir").path())
        .filter(|path| path.extension().is_some_and(|e| e == "out"))
        .map(|path| {
            let name = path
                .file_name()
                .expect("file name")
                .to_string_lossy()
                .into_owned();
            let bytes = std::fs::read(&path).expect("readable fixture");
            (name, bytes)
        })
        .collect();
    out.sort();
    assert!(
        out.len() >= 40,
        "expected the 3.3a vectors, found {}",
        out.len()
    );
    out
}

/// The one transcript whose name starts with `prefix` (e.g. `"06-"`).
pub fn fixture(prefix: &str) -> Vec<u8> {
    let mut found = fixtures()
        .into_iter()
        .filter(|(name, _)| name.starts_with(prefix));
    let (_, bytes) = found
        .next()
        .unwrap_or_else(|| panic!("no fixture {prefix}*"));
    assert!(found.next().is_none(), "several fixtures match {prefix}");
    bytes
}

/// Decodes `input` fed as the given chunks, then ends the stream.
pub fn decode_chunks<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> Vec<Event> {
    let mut codec = ControlCodec::new();
    let mut buf = BytesMut::new();
    let mut events = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        while let Some(event) = codec.decode(&mut buf).expect("decode never fails") {
            events.push(event);
        }
    }
    while let Some(event) = codec.decode_eof(&mut buf).expect("decode_eof never fails") {
        events.push(event);
    }
    events
}

/// Decodes `input` in one piece.
pub fn decode(input: &[u8]) -> Vec<Event> {
    decode_chunks([input])
}

/// All `%output`/`%extended-output` bytes of `pane`, concatenated.
pub fn pane_output(events: &[Event], pane: PaneId) -> Vec<u8> {
    let mut out = Vec::new();
    for event in events {
        if let Event::Notification(
            Notification::Output { pane: p, data }
            | Notification::ExtendedOutput { pane: p, data, .. },
        ) = event
            && *p == pane
        {
            out.extend_from_slice(data);
        }
    }
    out
}

/// A `Bytes` of a static string, for comparisons.
pub fn b(s: &'static str) -> Bytes {
    Bytes::from_static(s.as_bytes())
}
