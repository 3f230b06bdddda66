use super::*;
use crate::control::{PaneId, WindowId};

/// Feeds `chunks` one by one, then ends the stream, collecting every event.
fn decode_chunks(codec: &mut ControlCodec, chunks: &[&[u8]]) -> Vec<Event> {
    let mut buf = BytesMut::new();
    let mut events = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        while let Some(e) = codec.decode(&mut buf).expect("decode never fails") {
            events.push(e);
        }
    }
    while let Some(e) = codec.decode_eof(&mut buf).expect("decode_eof never fails") {
        events.push(e);
    }
    events
}

/// Decodes `input` whole, then in every chunk size up to 16, and checks
/// that all agree.
fn decode(max: usize, input: &[u8]) -> Vec<Event> {
    let whole = decode_chunks(&mut ControlCodec::with_max_line_length(max), &[input]);
    for size in 1..=16 {
        let chunks: Vec<&[u8]> = input.chunks(size).collect();
        let got = decode_chunks(&mut ControlCodec::with_max_line_length(max), &chunks);
        assert_eq!(got, whole, "chunk size {size}");
    }
    whole
}

fn reply(number: u32, flags: u32, ok: bool, lines: &[&'static str]) -> Event {
    Event::Reply(Reply {
        time: 1,
        number,
        flags,
        ok,
        lines: lines
            .iter()
            .map(|l| Bytes::from_static(l.as_bytes()))
            .collect(),
    })
}

fn malformed(kind: ParseErrorKind, line: &'static [u8]) -> Event {
    Event::Malformed(ParseError::new(kind, Bytes::from_static(line)))
}

fn note(n: Notification) -> Event {
    Event::Notification(n)
}

#[test]
fn folding_table() {
    let big = DEFAULT_MAX_LINE_LENGTH;
    let cases: Vec<(&str, &[u8], Vec<Event>)> = vec![
        ("empty stream", b"", vec![]),
        (
            "reply with body",
            b"%begin 1 5 1\nline one\n\n%end 1 5 1\n",
            vec![reply(5, 1, true, &["line one", ""])],
        ),
        (
            "error reply",
            b"%begin 1 6 1\ncan't find session: x\n%error 1 6 1\n",
            vec![reply(6, 1, false, &["can't find session: x"])],
        ),
        (
            "flags-0 block, then a notification",
            b"%begin 1 7 0\n%end 1 7 0\n%window-add @0\n",
            vec![
                reply(7, 0, true, &[]),
                note(Notification::WindowAdd {
                    window: WindowId(0),
                }),
            ],
        ),
        (
            "only the same triple closes",
            b"%begin 1 8 1\n%end 1 9 1\n%error 1 8 0\n%output %9 x\n%end 1 8 1 \n%end 1 8 1\n",
            vec![reply(
                8,
                1,
                true,
                &["%end 1 9 1", "%error 1 8 0", "%output %9 x", "%end 1 8 1 "],
            )],
        ),
        (
            "pause and continue inside a block are surfaced and kept",
            b"%begin 1 3 1\n%pause %2\n%continue %2\n%end 1 3 1\n",
            vec![
                note(Notification::Pause { pane: PaneId(2) }),
                note(Notification::Continue { pane: PaneId(2) }),
                reply(3, 1, true, &["%pause %2", "%continue %2"]),
            ],
        ),
        (
            "message inside a block",
            b"%begin 1 3 1\n%message hi there\n%end 1 3 1\n",
            vec![
                note(Notification::Message {
                    text: "hi there".into(),
                }),
                reply(3, 1, true, &["%message hi there"]),
            ],
        ),
        (
            "malformed lookalikes inside a block are just body",
            b"%begin 1 3 1\n%pause x\n%window-add zz\n%end 1 3 1\n",
            vec![reply(3, 1, true, &["%pause x", "%window-add zz"])],
        ),
        (
            "stray %end",
            b"%end 1 2 1\n%sessions-changed\n",
            vec![
                malformed(ParseErrorKind::UnmatchedGuard, b"%end 1 2 1"),
                note(Notification::SessionsChanged),
            ],
        ),
        (
            "malformed lines do not stop decoding",
            b"%window-add x\n%begin 1\n%sessions-changed\n",
            vec![
                malformed(
                    ParseErrorKind::BadId { field: "window id" },
                    b"%window-add x",
                ),
                malformed(ParseErrorKind::BadGuard, b"%begin 1"),
                note(Notification::SessionsChanged),
            ],
        ),
        (
            "text outside a block; CR kept in -C streams",
            b"bare line\r\n",
            vec![Event::Text(Bytes::from_static(b"bare line\r"))],
        ),
        (
            "a last line without newline is decoded at EOF",
            b"%exit",
            vec![note(Notification::Exit { reason: None })],
        ),
        (
            "open block at EOF",
            b"%begin 1 4 1\nhalf\n",
            vec![malformed(
                ParseErrorKind::UnterminatedBlock { lines: 1 },
                b"%begin 1 4 1",
            )],
        ),
        (
            "%exit ends an open block at EOF",
            b"%begin 1 4 1\npartial\n%exit server exited unexpectedly\n",
            vec![note(Notification::Exit {
                reason: Some("server exited unexpectedly".into()),
            })],
        ),
        (
            "%exit without newline ends an open block at EOF",
            b"%begin 1 4 1\n%exit",
            vec![note(Notification::Exit { reason: None })],
        ),
        (
            "-CC stream: DCS, CRLF, ST",
            b"\x1bP1000p%begin 1 2 0\r\n%end 1 2 0\r\n%window-add @0\r\n%exit\r\n\x1b\\",
            vec![
                reply(2, 0, true, &[]),
                note(Notification::WindowAdd {
                    window: WindowId(0),
                }),
                note(Notification::Exit { reason: None }),
            ],
        ),
        (
            "-CC: a body line starting with ST stays body",
            b"\x1bP1000p%begin 1 2 1\r\n\x1b\\x\r\n%end 1 2 1\r\n",
            vec![reply(2, 1, true, &["\x1b\\x"])],
        ),
        (
            "-CC: %exit inside a block then ST",
            b"\x1bP1000p%begin 1 2 1\r\n%exit\r\n\x1b\\",
            vec![note(Notification::Exit { reason: None })],
        ),
        (
            "a near-DCS start is text",
            b"\x1bP1000q\n",
            vec![Event::Text(Bytes::from_static(b"\x1bP1000q"))],
        ),
        (
            "a short near-DCS start at EOF is text",
            b"\x1bP1",
            vec![Event::Text(Bytes::from_static(b"\x1bP1"))],
        ),
        (
            "line at the limit",
            b"%exit\n",
            vec![note(Notification::Exit { reason: None })],
        ),
    ];
    for (what, input, want) in cases {
        assert_eq!(decode(big, input), want, "{what}");
    }
}

#[test]
fn over_long_lines_are_reported_once_and_skipped() {
    let mut input = b"%begin 1 2 1\n".to_vec();
    input.extend_from_slice(&[b'x'; 40]);
    input.extend_from_slice(b"\nok\n%end 1 2 1\n");
    input.extend_from_slice(&[b'y'; 17]);
    input.extend_from_slice(b"\n%exit\n");
    input.extend_from_slice(&[b'z'; 30]);
    let too_long = |len, fill: &[u8; 17]| {
        Event::Malformed(ParseError::new(
            ParseErrorKind::LineTooLong { len },
            Bytes::copy_from_slice(fill),
        ))
    };
    assert_eq!(
        decode(16, &input),
        [
            too_long(40, &[b'x'; 17]),
            reply(2, 1, true, &["ok"]),
            too_long(17, &[b'y'; 17]),
            note(Notification::Exit { reason: None }),
            too_long(30, &[b'z'; 17]),
        ]
    );
}

#[test]
fn buffered_bytes_stay_bounded_while_skipping() {
    let mut codec = ControlCodec::with_max_line_length(64);
    let mut buf = BytesMut::new();
    for _ in 0..1000 {
        buf.extend_from_slice(&[b'a'; 100]);
        assert!(codec.decode(&mut buf).expect("never fails").is_none());
        assert!(buf.len() <= 100, "buffer grew to {}", buf.len());
    }
    buf.extend_from_slice(b"\n%sessions-changed\n");
    assert!(matches!(
        codec.decode(&mut buf),
        Ok(Some(Event::Malformed(ParseError {
            kind: ParseErrorKind::LineTooLong { len: 100_000 },
            ..
        })))
    ));
    assert_eq!(
        codec.decode(&mut buf).ok().flatten(),
        Some(note(Notification::SessionsChanged))
    );
}

#[test]
fn partial_lines_are_not_rescanned() {
    let mut codec = ControlCodec::new();
    let mut buf = BytesMut::from(&b"%output %1 abc"[..]);
    assert_eq!(codec.decode(&mut buf).ok().flatten(), None);
    assert_eq!(codec.scanned, buf.len());
    buf.extend_from_slice(b"def\n");
    let got = codec.decode(&mut buf).ok().flatten();
    assert_eq!(
        got,
        Some(note(Notification::Output {
            pane: PaneId(1),
            data: Bytes::from_static(b"abcdef")
        }))
    );
    assert_eq!(codec.scanned, 0);
}

#[test]
fn reply_lines_are_slices_of_the_read_buffer() {
    let mut codec = ControlCodec::new();
    let mut buf = BytesMut::from(&b"%begin 1 2 1\nbody\n%end 1 2 1\n"[..]);
    let start = buf.as_ptr();
    let Ok(Some(Event::Reply(r))) = codec.decode(&mut buf) else {
        panic!("expected a reply");
    };
    assert_eq!(r.lines[0].as_ptr(), start.wrapping_add(13));
}

#[test]
fn in_block_tracks_open_blocks() {
    let mut codec = ControlCodec::new();
    let mut buf = BytesMut::from(&b"%begin 1 2 1\n"[..]);
    assert!(codec.decode(&mut buf).ok().flatten().is_none());
    assert!(codec.in_block());
    buf.extend_from_slice(b"%end 1 2 1\n");
    assert!(codec.decode(&mut buf).ok().flatten().is_some());
    assert!(!codec.in_block());
}

#[test]
fn a_block_over_its_limits_is_dropped_and_decoding_goes_on() {
    // 3 lines at most; 3 + 3 * LINE_OVERHEAD + 100 bytes at most.
    let limits = |codec: ControlCodec| codec.with_block_limits(3, 3 * LINE_OVERHEAD + 100);
    let too_large = |lines, bytes| {
        malformed(
            ParseErrorKind::BlockTooLarge { lines, bytes },
            b"%begin 1 1 1",
        )
    };
    let long = "x".repeat(200);
    let long_block = format!("%begin 1 1 1\n{long}\n%end 1 1 1\n%begin 1 2 1\nok\n%end 1 2 1\n");
    let cases: Vec<(&str, &[u8], Vec<Event>)> = vec![
        (
            "at the line limit: kept",
            b"%begin 1 1 1\na\nb\nc\n%end 1 1 1\n",
            vec![reply(1, 1, true, &["a", "b", "c"])],
        ),
        (
            "over the line limit: one error, then the next block",
            b"%begin 1 1 1\na\nb\nc\nd\n%pause %1\n%end 1 1 1\n%begin 1 2 1\nok\n%end 1 2 1\n",
            vec![
                note(Notification::Pause { pane: PaneId(1) }),
                too_large(5, 4 + 9 + 5 * LINE_OVERHEAD),
                reply(2, 1, true, &["ok"]),
            ],
        ),
        (
            "over the byte limit",
            long_block.as_bytes(),
            vec![
                too_large(1, 200 + LINE_OVERHEAD),
                reply(2, 1, true, &["ok"]),
            ],
        ),
        (
            "an error guard closes a dropped block too",
            b"%begin 1 1 1\na\nb\nc\nd\n%error 1 1 1\n%output %1 x\n",
            vec![
                too_large(4, 4 + 4 * LINE_OVERHEAD),
                note(Notification::Output {
                    pane: PaneId(1),
                    data: Bytes::from_static(b"x"),
                }),
            ],
        ),
        (
            "a dropped block cut short by %exit still reports the exit",
            b"%begin 1 1 1\na\nb\nc\nd\n%exit\n",
            vec![note(Notification::Exit { reason: None })],
        ),
        (
            "a dropped block left open counts every line",
            b"%begin 1 1 1\na\nb\nc\nd\ne\n",
            vec![malformed(
                ParseErrorKind::UnterminatedBlock { lines: 5 },
                b"%begin 1 1 1",
            )],
        ),
    ];
    for (name, input, want) in cases {
        let whole = decode_chunks(&mut limits(ControlCodec::new()), &[input]);
        assert_eq!(whole, want, "{name}");
        for size in 1..=7 {
            let chunks: Vec<&[u8]> = input.chunks(size).collect();
            let got = decode_chunks(&mut limits(ControlCodec::new()), &chunks);
            assert_eq!(got, want, "{name}, chunk size {size}");
        }
    }
}

#[test]
fn a_dropped_block_keeps_no_lines() {
    let mut codec = ControlCodec::new().with_block_limits(10, usize::MAX);
    let mut buf = BytesMut::from(&b"%begin 1 1 1\n"[..]);
    buf.extend_from_slice(&b"y\n".repeat(10_000));
    assert_eq!(codec.decode(&mut buf).expect("never fails"), None);
    let block = codec.block.as_ref().expect("still open");
    assert!(block.over);
    assert_eq!((block.count, block.lines.len()), (10_000, 1));
}
