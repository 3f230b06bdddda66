use super::*;
use crate::control::{Layout, Notification as N};
use proptest::prelude::*;

fn parse(line: &[u8]) -> Result<Line, ParseError> {
    parse_line(&Bytes::copy_from_slice(line))
}

fn note(line: &[u8]) -> N {
    match parse(line) {
        Ok(Line::Notification(n)) => n,
        other => panic!(
            "{:?}: expected a notification, got {other:?}",
            line.escape_ascii().to_string()
        ),
    }
}

fn kind(line: &[u8]) -> ParseErrorKind {
    match parse(line) {
        Err(e) => e.kind,
        other => panic!(
            "{:?}: expected an error, got {other:?}",
            line.escape_ascii().to_string()
        ),
    }
}

fn layout(s: &str) -> Layout {
    s.parse().expect("valid layout")
}

fn b<T: AsRef<[u8]> + ?Sized>(s: &'static T) -> Bytes {
    Bytes::from_static(s.as_ref())
}

#[test]
fn notifications_table() {
    let cases: Vec<(&[u8], N)> = vec![
        (b"%output %0 # ", N::Output { pane: PaneId(0), data: b("# ") }),
        (b"%output %1 A\\011B\\134C\\015\\012", N::Output { pane: PaneId(1), data: b(b"A\tB\\C\r\n") }),
        (b"%output %2 \xe2\x82", N::Output { pane: PaneId(2), data: b(b"\xe2\x82") }),
        (b"%output %2 ", N::Output { pane: PaneId(2), data: Bytes::new() }),
        (b"%output %2", N::Output { pane: PaneId(2), data: Bytes::new() }),
        (b"%output %4294967295 x", N::Output { pane: PaneId(u32::MAX), data: b("x") }),
        (
            b"%extended-output %0 0 : hello",
            N::ExtendedOutput { pane: PaneId(0), age_ms: 0, data: b("hello") },
        ),
        (
            b"%extended-output %1 1234 future tokens : a : b\\015",
            N::ExtendedOutput { pane: PaneId(1), age_ms: 1234, data: b(b"a : b\r") },
        ),
        (
            b"%extended-output %1 7 : ",
            N::ExtendedOutput { pane: PaneId(1), age_ms: 7, data: Bytes::new() },
        ),
        (b"%pause %2", N::Pause { pane: PaneId(2) }),
        (b"%continue %2", N::Continue { pane: PaneId(2) }),
        (
            b"%layout-change @1 020a,80x24,0,0{40x24,0,0,1,39x24,41,0,2} b25e,80x24,0,0,1 *Z",
            N::LayoutChange {
                window: WindowId(1),
                layout: layout("020a,80x24,0,0{40x24,0,0,1,39x24,41,0,2}"),
                visible_layout: layout("b25e,80x24,0,0,1"),
                flags: "*Z".into(),
            },
        ),
        (
            b"%layout-change @2 c19e,80x24,0,0[80x12,0,0,2,80x11,0,13,3] c19e,80x24,0,0[80x12,0,0,2,80x11,0,13,3] ",
            N::LayoutChange {
                window: WindowId(2),
                layout: layout("c19e,80x24,0,0[80x12,0,0,2,80x11,0,13,3]"),
                visible_layout: layout("c19e,80x24,0,0[80x12,0,0,2,80x11,0,13,3]"),
                flags: String::new(),
            },
        ),
        (
            b"%layout-change @0 b25d,80x24,0,0,0",
            N::LayoutChange {
                window: WindowId(0),
                layout: layout("b25d,80x24,0,0,0"),
                visible_layout: layout("b25d,80x24,0,0,0"),
                flags: String::new(),
            },
        ),
        (b"%window-add @0", N::WindowAdd { window: WindowId(0) }),
        (b"%window-add @3 later-field", N::WindowAdd { window: WindowId(3) }),
        (b"%unlinked-window-add @2", N::UnlinkedWindowAdd { window: WindowId(2) }),
        (b"%window-close @7", N::WindowClose { window: WindowId(7) }),
        (b"%unlinked-window-close @7", N::UnlinkedWindowClose { window: WindowId(7) }),
        (b"%window-renamed @1 escapes", N::WindowRenamed { window: WindowId(1), name: "escapes".into() }),
        (b"%window-renamed @0 main renamed", N::WindowRenamed { window: WindowId(0), name: "main renamed".into() }),
        (b"%window-renamed @0 [tmux]", N::WindowRenamed { window: WindowId(0), name: "[tmux]".into() }),
        (b"%window-renamed @0 ", N::WindowRenamed { window: WindowId(0), name: String::new() }),
        (b"%window-renamed @0", N::WindowRenamed { window: WindowId(0), name: String::new() }),
        (
            b"%unlinked-window-renamed @3 w2 renamed",
            N::UnlinkedWindowRenamed { window: WindowId(3), name: "w2 renamed".into() },
        ),
        (b"%window-pane-changed @1 %2", N::WindowPaneChanged { window: WindowId(1), pane: PaneId(2) }),
        (b"%session-changed $0 demo", N::SessionChanged { session: SessionId(0), name: "demo".into() }),
        (b"%session-changed $0 a\\\\b", N::SessionChanged { session: SessionId(0), name: "a\\\\b".into() }),
        (
            b"%client-session-changed client-19912 $0 demo",
            N::ClientSessionChanged { client: "client-19912".into(), session: SessionId(0), name: "demo".into() },
        ),
        (
            b"%client-session-changed /dev/pts/3 $1 demo renamed",
            N::ClientSessionChanged { client: "/dev/pts/3".into(), session: SessionId(1), name: "demo renamed".into() },
        ),
        (b"%client-detached client-19965", N::ClientDetached { client: "client-19965".into() }),
        (b"%session-renamed $0 demo renamed", N::SessionRenamed { session: SessionId(0), name: "demo renamed".into() }),
        (b"%session-renamed $0 sess-\xc3\xa9", N::SessionRenamed { session: SessionId(0), name: "sess-é".into() }),
        (b"%session-window-changed $0 @1", N::SessionWindowChanged { session: SessionId(0), window: WindowId(1) }),
        (b"%sessions-changed", N::SessionsChanged),
        (b"%pane-mode-changed %0", N::PaneModeChanged { pane: PaneId(0) }),
        (
            b"%subscription-changed sess $0 - - - : demo renamed",
            N::SubscriptionChanged {
                name: "sess".into(),
                session: SessionId(0),
                window: None,
                index: None,
                pane: None,
                value: b("demo renamed"),
            },
        ),
        (
            b"%subscription-changed wins $0 @1 1 - : escapes",
            N::SubscriptionChanged {
                name: "wins".into(),
                session: SessionId(0),
                window: Some(WindowId(1)),
                index: Some(1),
                pane: None,
                value: b("escapes"),
            },
        ),
        (
            b"%subscription-changed panes $0 @1 1 %2 : cat",
            N::SubscriptionChanged {
                name: "panes".into(),
                session: SessionId(0),
                window: Some(WindowId(1)),
                index: Some(1),
                pane: Some(PaneId(2)),
                value: b("cat"),
            },
        ),
        (
            // The value is raw: a backslash stays a backslash, ` : ` is data.
            b"%subscription-changed t $0 @1 1 %2 extra : a : b\\012",
            N::SubscriptionChanged {
                name: "t".into(),
                session: SessionId(0),
                window: Some(WindowId(1)),
                index: Some(1),
                pane: Some(PaneId(2)),
                value: b(b"a : b\\012"),
            },
        ),
        (
            b"%subscription-changed e $0 - - - : ",
            N::SubscriptionChanged {
                name: "e".into(),
                session: SessionId(0),
                window: None,
                index: None,
                pane: None,
                value: Bytes::new(),
            },
        ),
        (b"%exit", N::Exit { reason: None }),
        (b"%exit ", N::Exit { reason: None }),
        (b"%exit server exited unexpectedly", N::Exit { reason: Some("server exited unexpectedly".into()) }),
        (b"%exit too far behind", N::Exit { reason: Some("too far behind".into()) }),
        (
            b"%config-error /etc/tmux.conf:1: unknown option: no-such-option",
            N::ConfigError { text: "/etc/tmux.conf:1: unknown option: no-such-option".into() },
        ),
        (b"%message hello world", N::Message { text: "hello world".into() }),
        (b"%paste-buffer-changed buffer0", N::PasteBufferChanged { name: "buffer0".into() }),
        (b"%paste-buffer-deleted my buf", N::PasteBufferDeleted { name: "my buf".into() }),
        (b"%paste-buffer-deleted bad\xff", N::PasteBufferDeleted { name: "bad\u{fffd}".into() }),
        (b"%noop", N::Unknown { name: "noop".into(), args: Bytes::new() }),
        (b"%future-thing a b  c", N::Unknown { name: "future-thing".into(), args: b("a b  c") }),
        (b"%9 lookalike", N::Unknown { name: "9".into(), args: b("lookalike") }),
        (b"%outputx %1 y", N::Unknown { name: "outputx".into(), args: b("%1 y") }),
    ];
    for (line, want) in cases {
        assert_eq!(
            note(line),
            want,
            "line {:?}",
            line.escape_ascii().to_string()
        );
    }
}

#[test]
fn guards_and_text() {
    let g = |kind, time, number, flags| {
        Ok(Line::Guard(Guard {
            kind,
            time,
            number,
            flags,
        }))
    };
    let cases: Vec<(&[u8], Result<Line, ParseErrorKind>)> = vec![
        (
            b"%begin 1796008295 260 0",
            g(GuardKind::Begin, 1_796_008_295, 260, 0),
        ),
        (
            b"%end 1796008296 266 1",
            g(GuardKind::End, 1_796_008_296, 266, 1),
        ),
        (
            b"%error 1796008298 271 1",
            g(GuardKind::Error, 1_796_008_298, 271, 1),
        ),
        (b"%begin 1 2", Err(ParseErrorKind::BadGuard)),
        (b"%begin 1 2 3 4", Err(ParseErrorKind::BadGuard)),
        (b"%end 1 2 x", Err(ParseErrorKind::BadGuard)),
        (b"%end 1 2 3 ", Err(ParseErrorKind::BadGuard)),
        (b"%end 1 99999999999 3", Err(ParseErrorKind::BadGuard)),
        (b"%begin", Err(ParseErrorKind::BadGuard)),
        (b"plain text", Ok(Line::Text(b("plain text")))),
        (b"", Ok(Line::Text(Bytes::new()))),
        (b"\xff\xfe", Ok(Line::Text(b(b"\xff\xfe")))),
        (b"  %output %1 x", Ok(Line::Text(b("  %output %1 x")))),
    ];
    for (line, want) in cases {
        let got = parse(line).map_err(|e| e.kind);
        assert_eq!(got, want, "line {:?}", line.escape_ascii().to_string());
    }
}

#[test]
fn parse_guard_only_takes_exact_guards() {
    assert_eq!(
        parse_guard(b"%end 1 2 3"),
        Some(Guard {
            kind: GuardKind::End,
            time: 1,
            number: 2,
            flags: 3
        })
    );
    assert_eq!(parse_guard(b"%end 1 2 3 x"), None);
    assert_eq!(parse_guard(b"%endx 1 2 3"), None);
    assert_eq!(parse_guard(b"%output %1 x"), None);
    assert_eq!(parse_guard(b"%error 1 2"), None);
}

#[test]
fn malformed_lines_table() {
    use ParseErrorKind as K;
    let cases: Vec<(&[u8], ParseErrorKind)> = vec![
        (b"%output", K::MissingField { field: "pane id" }),
        (b"%output x", K::BadId { field: "pane id" }),
        (b"%output %x data", K::BadId { field: "pane id" }),
        (b"%output @1 data", K::BadId { field: "pane id" }),
        (b"%output %4294967296 data", K::BadId { field: "pane id" }),
        (b"%output %1 bad\\9", K::BadEscape { offset: 14 }),
        (b"%extended-output %1 x : d", K::BadNumber { field: "age" }),
        (
            b"%extended-output %1 5 d",
            K::MissingField {
                field: "\" : \" before the data",
            },
        ),
        (b"%extended-output %1", K::MissingField { field: "age" }),
        (b"%pause", K::MissingField { field: "pane id" }),
        (b"%pause %", K::BadId { field: "pane id" }),
        (b"%window-add x", K::BadId { field: "window id" }),
        (b"%window-add @1x", K::BadId { field: "window id" }),
        (b"%window-add", K::MissingField { field: "window id" }),
        (
            b"%window-pane-changed @1",
            K::MissingField { field: "pane id" },
        ),
        (
            b"%session-changed 0 demo",
            K::BadId {
                field: "session id",
            },
        ),
        (
            b"%session-changed $0 bad\xff",
            K::NotUtf8 {
                field: "session name",
            },
        ),
        (
            b"%client-session-changed c 0 x",
            K::BadId {
                field: "session id",
            },
        ),
        (
            b"%client-detached",
            K::MissingField {
                field: "client name",
            },
        ),
        (
            b"%layout-change @1 zzzz,80x24,0,0,0 b25d,80x24,0,0,0 *",
            K::BadLayout { offset: 18 },
        ),
        (
            b"%layout-change @1 b25d,80x24,0,0,0 b25d,80x24,0,0 *",
            K::BadLayout { offset: 49 },
        ),
        (b"%layout-change @1", K::MissingField { field: "layout" }),
        (
            b"%subscription-changed n $0 - - -",
            K::MissingField {
                field: "\" : \" before the value",
            },
        ),
        (
            b"%subscription-changed n $0 x - - : v",
            K::BadId { field: "window id" },
        ),
        (
            b"%subscription-changed n $0 @1 x - : v",
            K::BadNumber {
                field: "window index",
            },
        ),
        (b"%", K::BadName),
        (b"% x", K::BadName),
        (b"%a\xffb x", K::BadName),
    ];
    for (line, want) in cases {
        assert_eq!(
            kind(line),
            want,
            "line {:?}",
            line.escape_ascii().to_string()
        );
    }
}

#[test]
fn client_session_changed_needs_a_session() {
    // `%client-session-changed c $0` has no name: accepted with an empty one.
    assert_eq!(
        note(b"%client-session-changed c $0"),
        N::ClientSessionChanged {
            client: "c".into(),
            session: SessionId(0),
            name: String::new()
        }
    );
}

#[test]
fn output_without_escapes_is_zero_copy() {
    let line = Bytes::from_static(b"%output %3 hello world");
    let Ok(Line::Notification(N::Output { data, .. })) = parse_line(&line) else {
        panic!("not output");
    };
    assert_eq!(data, "hello world");
    assert_eq!(
        data.as_ptr(),
        line[11..].as_ptr(),
        "data must be a slice of the line"
    );
}

#[test]
fn unescaped_output_shares_the_scratch_chunk() {
    let mut scratch = BytesMut::new();
    let one = Bytes::from_static(b"%output %1 a\\015");
    let two = Bytes::from_static(b"%output %1 b\\012");
    let get = |l: &Bytes, s: &mut BytesMut| match parse_line_into(l, s) {
        Ok(Line::Notification(N::Output { data, .. })) => data,
        other => panic!("{other:?}"),
    };
    let a = get(&one, &mut scratch);
    let b2 = get(&two, &mut scratch);
    assert_eq!((&a[..], &b2[..]), (&b"a\r"[..], &b"b\n"[..]));
    // The second line was written right after the first in the same chunk.
    assert_eq!(a.as_ptr().wrapping_add(2), b2.as_ptr());
}

#[test]
fn error_messages() {
    let msg = |line: &[u8]| parse(line).expect_err("malformed").to_string();
    insta::assert_snapshot!(msg(b"%window-add x"), @r#"malformed %window-add line: bad window id in "%window-add x""#);
    insta::assert_snapshot!(msg(b"%output %1 a\\9\x1b\xff"), @r#"malformed %output line: bad escape at byte 12 (want \ and three octal digits) in "%output %1 a\\9\x1b\xff""#);
    insta::assert_snapshot!(msg(b"%begin 1 2"), @r#"malformed %begin line: expected three numbers (time, command number, flags) in "%begin 1 2""#);
    insta::assert_snapshot!(msg(b"%layout-change @1 b25d,80x24"), @r#"malformed %layout-change line: bad layout at byte 28 in "%layout-change @1 b25d,80x24""#);
    insta::assert_snapshot!(msg(b"%session-changed $0 \xff"), @r#"malformed %session-changed line: session name is not UTF-8 in "%session-changed $0 \xff""#);
    insta::assert_snapshot!(msg(b"%extended-output %1 2 x"), @r#"malformed %extended-output line: missing " : " before the data in "%extended-output %1 2 x""#);
    insta::assert_snapshot!(msg(b"% x"), @r#"malformed control-mode line: bad notification name in "% x""#);
    let long = ParseError::new(
        ParseErrorKind::LineTooLong { len: 2_000_000 },
        Bytes::from(vec![b'a'; 200]),
    );
    insta::assert_snapshot!(long.to_string(), @r#"line of 2000000 bytes is over the length limit: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa…""#);
    let open = ParseError::new(
        ParseErrorKind::UnterminatedBlock { lines: 1 },
        b("%begin 1 2 1"),
    );
    insta::assert_snapshot!(open.to_string(), @r#"reply block still open at end of stream after 1 line: "%begin 1 2 1""#);
    let unmatched = ParseError::new(ParseErrorKind::UnmatchedGuard, b("%end 1 2 1"));
    insta::assert_snapshot!(unmatched.to_string(), @r#"malformed %end line: no reply block is open in "%end 1 2 1""#);
}

#[test]
fn layout_round_trips_through_the_notification() {
    let line = b"%layout-change @2 a7f4,80x24,0,0[80x11,0,0{39x11,0,0,2,40x11,40,0,3},80x12,0,12,4] a7f4,80x24,0,0[80x11,0,0{39x11,0,0,2,40x11,40,0,3},80x12,0,12,4] ";
    let N::LayoutChange {
        layout,
        visible_layout,
        flags,
        ..
    } = note(line)
    else {
        panic!("not a layout change");
    };
    let rendered = format!("%layout-change @2 {layout} {visible_layout} {flags}");
    assert_eq!(rendered.as_bytes(), &line[..]);
}

proptest! {
    #[test]
    fn parse_line_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = parse(&data);
    }

    #[test]
    fn parse_line_never_panics_on_notification_lookalikes(
        name in prop::sample::select(vec![
            "output", "extended-output", "begin", "end", "error", "layout-change",
            "subscription-changed", "client-session-changed", "window-renamed", "exit",
            "window-pane-changed", "session-window-changed", "pause",
        ]),
        args in "[ %@$0-9a-z:,x{}\\[\\]\\\\-]{0,60}",
    ) {
        let line = format!("%{name}{args}");
        let _ = parse(line.as_bytes());
    }

    #[test]
    fn output_round_trips(pane in any::<u32>(), data in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut line = format!("%output %{pane} ").into_bytes();
        line.extend_from_slice(&crate::control::escape::escape_output(&data));
        prop_assert_eq!(
            note(&line),
            N::Output { pane: PaneId(pane), data: Bytes::from(data) }
        );
    }
}
