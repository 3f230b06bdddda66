//! Every recorded tmux 3.3a transcript through the codec: it must decode
//! cleanly, identically however it is chunked, and to what tmux meant.

use bytes::Bytes;
use tmux_engine::control::{Event, Layout, Notification as N, Reply};
use tmux_engine::vocab::{PaneId, SessionId, WindowId};

use crate::support::{b, decode, decode_chunks, fixture, fixtures, pane_output};

fn reply(time: i64, number: u32, flags: u32, ok: bool, lines: &[&'static str]) -> Event {
    Event::Reply(Reply {
        time,
        number,
        flags,
        ok,
        lines: lines.iter().map(|l| b(l)).collect(),
    })
}

fn note(n: N) -> Event {
    Event::Notification(n)
}

fn replies(events: &[Event]) -> Vec<&Reply> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Reply(r) => Some(r),
            _ => None,
        })
        .collect()
}

#[test]
fn every_fixture_decodes_without_malformed_or_unknown_events() {
    for (name, bytes) in fixtures() {
        let events = decode(&bytes);
        assert!(!events.is_empty(), "{name}: no events");
        for event in &events {
            assert!(
                !matches!(
                    event,
                    Event::Malformed(_) | Event::Notification(N::Unknown { .. })
                ),
                "{name}: {event:?}"
            );
        }
    }
}

#[test]
fn every_fixture_decodes_the_same_in_any_chunk_size() {
    for (name, bytes) in fixtures() {
        let whole = decode(&bytes);
        for size in (1..=64).chain([100, 1000, 2731, 4096, 65536]) {
            let chunked = decode_chunks(bytes.chunks(size));
            assert_eq!(chunked, whole, "{name}: chunk size {size}");
        }
    }
}

#[test]
fn v06_output_is_the_exact_bytes_the_program_wrote() {
    let events = decode(&fixture("06-"));
    // emit.sh's output, with the pty's `\n` -> `\r\n` (docs/control-mode.md, "Pane output").
    let want: &[u8] = b"A\tB\\C\x1b[1mbold\x1b[0m\r\n\
        utf8: \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\r\n\
        bad: \xff\xfe del:\x7f nul:\x00 bel:\x07 esc-only:\x1b end\r\n\
        %output %9 lookalike and %end 1 2 3\r\n\
        literal backslash-digits: \\012 \\134\r\n\
        no-newline-at-end";
    assert_eq!(pane_output(&events, PaneId(1)), want);
    assert_eq!(
        events[..3],
        [
            reply(1796008302, 282, 1, true, &[]),
            note(N::SessionWindowChanged {
                session: SessionId(0),
                window: WindowId(1)
            }),
            note(N::WindowAdd {
                window: WindowId(1)
            }),
        ]
    );
}

#[test]
fn v07_capture_body_keeps_lines_that_look_like_protocol() {
    let events = decode(&fixture("07-"));
    assert!(
        events.iter().all(|e| matches!(e, Event::Reply(_))),
        "{events:?}"
    );
    let r = replies(&events);
    assert_eq!(r.len(), 3);
    assert_eq!((r[0].number, r[0].ok), (286, true));
    assert_eq!(r[0].lines[3], "%output %9 lookalike and %end 1 2 3");
    assert_eq!(r[0].lines[0], "A       B\\Cbold");
    // 2 text lines... and the pane's empty rows, all kept.
    assert_eq!(r[0].lines.len(), 6 + 18);
    // `-e` keeps real ESC bytes; `-C` octal-escapes them itself.
    assert_eq!(r[1].lines[0], "A       B\\C\x1b[1mbold");
    assert_eq!(r[2].lines[0], "A       B\\\\C\\033[1mbold");
}

#[test]
fn v04_error_replies_keep_a_stray_cr() {
    let r = replies(&decode(&fixture("04-")))
        .into_iter()
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(
        r.iter().map(|r| r.ok).collect::<Vec<_>>(),
        [false, false, false, true, false]
    );
    assert_eq!(
        r[4].lines,
        [b("parse error: unknown command: list-sessions\r")]
    );
}

#[test]
fn v12_pause_and_continue_inside_blocks() {
    assert_eq!(
        decode(&fixture("12-")),
        [
            note(N::Pause { pane: PaneId(2) }),
            reply(1796008323, 366, 1, true, &["%pause %2"]),
            note(N::Continue { pane: PaneId(2) }),
            reply(1796008324, 369, 1, true, &["%continue %2"]),
            note(N::Output {
                pane: PaneId(2),
                data: b("after-continue")
            }),
            reply(1796008324, 372, 1, true, &[]),
            reply(1796008325, 375, 1, true, &[]),
            note(N::Output {
                pane: PaneId(2),
                data: b("after-on")
            }),
            reply(1796008326, 378, 1, true, &["sync"]),
        ]
    );
}

#[test]
fn v28_utf8_split_across_output_lines_reassembles() {
    let events = decode(&fixture("28-"));
    let mut want = b"a".to_vec();
    want.extend("€".repeat(3000).as_bytes());
    want.extend_from_slice(b"\r\n");
    assert_eq!(pane_output(&events, PaneId(2)), want);
    let pieces: Vec<&Bytes> = events
        .iter()
        .filter_map(|e| match e {
            Event::Notification(N::Output { data, .. }) => Some(data),
            _ => None,
        })
        .collect();
    assert!(pieces.len() > 10, "tmux cut the burst into many lines");
    assert!(
        pieces.iter().any(|p| std::str::from_utf8(p).is_err()),
        "at least one line ends inside a character"
    );
}

#[test]
fn v31_layout_change_with_empty_flags_round_trips() {
    let bytes = fixture("31-");
    let events = decode(&bytes);
    let raw: Vec<&[u8]> = bytes
        .split(|&c| c == b'\n')
        .filter(|l| l.starts_with(b"%layout-change "))
        .collect();
    let changes: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::Notification(N::LayoutChange {
                window,
                layout,
                visible_layout,
                flags,
            }) => {
                assert_eq!(*window, WindowId(2));
                assert!(flags.is_empty(), "flags {flags:?}");
                assert!(layout.checksum_matches() && visible_layout.checksum_matches());
                Some(format!(
                    "%layout-change {window} {layout} {visible_layout} {flags}"
                ))
            }
            _ => None,
        })
        .collect();
    assert_eq!(changes.len(), 4);
    for (rendered, raw) in changes.iter().zip(&raw) {
        assert_eq!(
            rendered.as_bytes(),
            *raw,
            "ends with the empty flags' space"
        );
    }
    let tiled: Layout = "a7f4,80x24,0,0[80x11,0,0{39x11,0,0,2,40x11,40,0,3},80x12,0,12,4]"
        .parse()
        .expect("valid");
    assert_eq!(tiled.panes(), [PaneId(2), PaneId(3), PaneId(4)]);
}

#[test]
fn v08_zoom_flags_and_visible_layout() {
    let events = decode(&fixture("08-"));
    let zoomed = events
        .iter()
        .find_map(|e| match e {
            Event::Notification(N::LayoutChange {
                layout,
                visible_layout,
                flags,
                ..
            }) if flags == "*Z" => Some((layout.to_string(), visible_layout.to_string())),
            _ => None,
        })
        .expect("a zoomed layout change");
    assert_eq!(
        zoomed,
        (
            "020a,80x24,0,0{40x24,0,0,1,39x24,41,0,2}".into(),
            "b25e,80x24,0,0,1".into()
        )
    );
}

#[test]
fn v26_cc_stream_decodes_like_a_c_stream() {
    let cc = fixture("26-");
    let want = [
        reply(1796008347, 260, 0, true, &[]),
        note(N::WindowAdd {
            window: WindowId(0),
        }),
        note(N::SessionsChanged),
        note(N::SessionChanged {
            session: SessionId(0),
            name: "cc".into(),
        }),
        reply(
            1796008348,
            266,
            1,
            true,
            &["cc: 1 windows (created Mon Nov 30 03:12:27 2026) (attached)"],
        ),
        note(N::Exit { reason: None }),
    ];
    assert_eq!(decode(&cc), want);
    // The same stream unwrapped by hand, as `-C` would send it.
    let plain: Vec<u8> = cc[7..cc.len() - 2]
        .iter()
        .copied()
        .filter(|&c| c != b'\r')
        .collect();
    assert_eq!(decode(&plain), want);
}

#[test]
fn v33_exit_with_reason() {
    let events = decode(&fixture("33-"));
    assert_eq!(
        events,
        [
            reply(1796008380, 297, 1, true, &["20084"]),
            note(N::Exit {
                reason: Some("server exited unexpectedly".into())
            }),
        ]
    );
}

#[test]
fn v10_subscriptions() {
    /// name, window, index, pane, value
    type Sub = (String, Option<WindowId>, Option<u32>, Option<PaneId>, Bytes);
    let subs: Vec<Sub> = decode(&fixture("10-"))
        .into_iter()
        .filter_map(|e| match e {
            Event::Notification(N::SubscriptionChanged {
                name,
                session,
                window,
                index,
                pane,
                value,
            }) => {
                assert_eq!(session, SessionId(0));
                Some((name, window, index, pane, value))
            }
            _ => None,
        })
        .collect();
    let w = |n| Some(WindowId(n));
    let p = |n| Some(PaneId(n));
    assert_eq!(
        subs,
        [
            ("p0".into(), w(0), Some(0), p(0), b("100x30")),
            ("panes".into(), w(0), Some(0), p(0), b("sh")),
            ("panes".into(), w(1), Some(1), p(1), b("sh")),
            ("panes".into(), w(1), Some(1), p(2), b("cat")),
            ("sess".into(), None, None, None, b("demo renamed")),
            ("wins".into(), w(0), Some(0), None, b("main")),
            ("wins".into(), w(1), Some(1), None, b("escapes")),
            ("wins".into(), w(0), Some(0), None, b("main renamed")),
        ]
    );
}

#[test]
fn v09_names_with_spaces_and_unlinked_windows() {
    let events = decode(&fixture("09-"));
    let has = |n: N| events.contains(&note(n));
    assert!(has(N::SessionRenamed {
        session: SessionId(0),
        name: "demo renamed".into()
    }));
    assert!(has(N::UnlinkedWindowRenamed {
        window: WindowId(3),
        name: "w2 renamed".into()
    }));
    assert!(has(N::UnlinkedWindowAdd {
        window: WindowId(2)
    }));
    assert!(has(N::UnlinkedWindowClose {
        window: WindowId(4)
    }));
    assert!(events.contains(&reply(
        1796008312,
        341,
        1,
        false,
        &["parse error: syntax error"]
    )));
    assert!(events.contains(&reply(
        1796008313,
        342,
        1,
        true,
        &["0 @0 main", "1 @1 escapes", "2 @3 w2 renamed"]
    )));
}

#[test]
fn v17_other_clients() {
    assert_eq!(
        decode(&fixture("17-client-session-changed-detached.client-1")),
        [
            note(N::ClientSessionChanged {
                client: "client-19965".into(),
                session: SessionId(1),
                name: "other".into(),
            }),
            note(N::ClientSessionChanged {
                client: "client-19965".into(),
                session: SessionId(0),
                name: "demo renamed".into(),
            }),
            note(N::ClientDetached {
                client: "client-19965".into()
            }),
        ]
    );
}

#[test]
fn v24_failed_attach_is_a_flags_0_error_then_exit() {
    assert_eq!(
        decode(&fixture("24-")),
        [
            reply(1796008346, 264, 0, false, &["can't find session: nosuch"]),
            note(N::Exit { reason: None }),
        ]
    );
}

#[test]
fn v27b_extended_output_and_pause() {
    let events = decode(&fixture("27b-"));
    assert_eq!(pane_output(&events, PaneId(0)), b"hello");
    assert!(events.contains(&note(N::Pause { pane: PaneId(1) })));
    assert!(events.iter().any(|e| matches!(
        e,
        Event::Notification(N::ExtendedOutput {
            pane: PaneId(1),
            age_ms: 1,
            ..
        })
    )));
    // The harness's own marker lines are bare text, not errors.
    assert!(events.contains(&Event::Text(b(
        "[harness: further %extended-output lines omitted]"
    ))));
}

#[test]
fn v32_hook_blocks_have_flags_0() {
    let flags: Vec<(u32, u32)> = replies(&decode(&fixture("32-")))
        .iter()
        .map(|r| (r.number, r.flags))
        .collect();
    assert_eq!(
        flags,
        [
            (278, 1),
            (279, 1),
            (280, 0),
            (282, 1),
            (283, 1),
            (284, 1),
            (285, 1),
            (286, 1),
            (287, 1),
            (289, 1)
        ]
    );
}

#[test]
fn v35_vis_encoded_names_decode_with_unvis() {
    use tmux_engine::control::escape::unvis;
    let events = decode(&fixture("35-"));
    let window = events
        .iter()
        .find_map(|e| match e {
            Event::Notification(N::WindowRenamed {
                window: WindowId(0),
                name,
            }) => Some(name.clone()),
            _ => None,
        })
        .expect("a window rename");
    // tmux stores names vis-encoded and sends them that way.
    assert_eq!(window, "tab\\there back\\\\slash esc\\033x café");
    assert_eq!(unvis(&window), "tab\there back\\slash esc\x1bx café");
    assert!(events.contains(&note(N::SessionRenamed {
        session: SessionId(0),
        name: "s p\\\\c".into()
    })));
    assert_eq!(pane_output(&events, PaneId(0)), b"A\\\r\nA\\\r\n");
}
