//! Unit tests of `command.rs`: quoting, the builder, hex chunks.

use super::*;
use crate::ErrorCode;
use proptest::prelude::*;

#[test]
fn quotes_table() {
    let cases: &[(&[u8], &str)] = &[
        (b"", r#""""#),
        (b"plain", r#""plain""#),
        (b"two words", r#""two words""#),
        (b"a;b", r#""a\;b""#),
        (b"$HOME ${HOME}", r#""\$HOME \$\{HOME\}""#),
        (b"~root", r#""\~root""#),
        (b"#{pane_id}", r#""\#\{pane_id\}""#),
        (b"{ kill-server }", r#""\{ kill-server \}""#),
        (b"'\"\\", r#""'\"\\""#),
        (b"a\nb\rc\td", r#""a\012b\015c\011d""#),
        (b"\x1b[0m\x7f", r#""\033[0m\177""#),
        ("é".as_bytes(), r#""\303\251""#),
        (b"\xff\xfe", r#""\377\376""#),
        (b"-t", r#""-t""#),
    ];
    for &(input, want) in cases {
        assert_eq!(
            quote(input).expect("test inputs hold no NUL"),
            want,
            "{input:?}"
        );
    }
}

#[test]
fn quote_refuses_nul() {
    let err = quote(b"a\0b").expect_err("NUL is refused");
    assert_eq!(err.code(), ErrorCode::InvalidInput);
    insta::assert_snapshot!(err, @r#"invalid input: tmux argument "a\0b" contains a NUL byte"#);
}

/// Inverse of `quote` following tmux's lexer rules for a double-quoted
/// token (cmd-parse.y `yylex_token_escape`), to check the encoding.
fn unquote(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    assert_eq!(bytes.first(), Some(&b'"'));
    assert_eq!(bytes.last(), Some(&b'"'));
    let inner = &bytes[1..bytes.len() - 1];
    let mut out = Vec::new();
    let mut i = 0;
    while i < inner.len() {
        match inner[i] {
            b'\\' => {
                let next = inner[i + 1];
                if (b'0'..=b'3').contains(&next) {
                    let digits = &inner[i + 1..i + 4];
                    assert!(digits.iter().all(|d| (b'0'..=b'7').contains(d)));
                    out.push((digits[0] - b'0') * 64 + (digits[1] - b'0') * 8 + (digits[2] - b'0'));
                    i += 4;
                } else {
                    assert!(!next.is_ascii_alphanumeric(), "letter escape {next}");
                    out.push(next);
                    i += 2;
                }
            }
            b'"' | b'$' | b'~' => panic!("unescaped special byte in {text}"),
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

proptest! {
    #[test]
    fn quote_round_trips(arg in proptest::collection::vec(1u8..=255, 0..200)) {
        let quoted = quote(&arg).expect("generated args hold no NUL");
        prop_assert!(quoted.is_ascii());
        prop_assert!(!quoted.contains('\n') && !quoted.contains('\r'));
        prop_assert_eq!(unquote(&quoted), arg);
    }

    #[test]
    fn line_is_one_line(args in proptest::collection::vec(
        proptest::collection::vec(1u8..=255, 0..40), 0..6)) {
        let mut cmd = TmuxCommand::new("display-message").flag("-p");
        for a in &args {
            cmd = cmd.format_time_arg(a);
        }
        prop_assert!(!cmd.line().contains('\n') && !cmd.line().contains('\r'));
        prop_assert_eq!(cmd.argv().len(), 2 + usize::from(!args.is_empty()) + args.len());
    }

    #[test]
    fn argv_escape_round_trips(arg in proptest::collection::vec(1u8..=255, 0..40)) {
        // tmux's cmd_parse_from_arguments on one argument.
        let mut got = argv_escape(&arg).into_vec();
        let mut ends_command = false;
        if got.last() == Some(&b';') {
            got.pop();
            match got.last_mut() {
                Some(b) if *b == b'\\' => *b = b';',
                _ => ends_command = true,
            }
        }
        prop_assert!(!ends_command);
        prop_assert_eq!(got, arg);
    }
}

#[test]
fn builder_orders_options_before_positionals() {
    let cmd = TmuxCommand::new("set-buffer")
        .arg("-x")
        .opt("-b", "buf")
        .flag("-w");
    assert_eq!(cmd.line(), r#"set-buffer -b "buf" -w -- "-x""#);
    let argv: Vec<_> = cmd
        .argv()
        .iter()
        .map(|a| a.to_str().expect("utf8"))
        .collect();
    assert_eq!(argv, ["set-buffer", "-b", "buf", "-w", "--", "-x"]);
}

#[test]
fn builder_lines_and_argv() {
    let cases: Vec<(TmuxCommand, &str, Vec<&str>)> = vec![
        (
            TmuxCommand::new("kill-server"),
            "kill-server",
            vec!["kill-server"],
        ),
        (
            TmuxCommand::new("has-session").target("=main"),
            r#"has-session -t "=main""#,
            vec!["has-session", "-t", "=main"],
        ),
        (
            TmuxCommand::new("display-message")
                .flag("-p")
                .format_arg("100% #1 #{x};"),
            r#"display-message -p -- "100% \#\#1 \#\#\{x\}\;""#,
            vec!["display-message", "-p", "--", r"100% ##1 ##{x}\;"],
        ),
        (
            TmuxCommand::new("display-message")
                .flag("-p")
                .format_time_arg("100%H #"),
            r#"display-message -p -- "100%%H \#\#""#,
            vec!["display-message", "-p", "--", "100%%H ##"],
        ),
        (
            TmuxCommand::new("list-panes")
                .target(PaneId(3))
                .opt("-F", "#{pane_id}"),
            r#"list-panes -t "%3" -F "\#\{pane_id\}""#,
            vec!["list-panes", "-t", "%3", "-F", "#{pane_id}"],
        ),
        (
            TmuxCommand::new("rename-session").format_opt("-t", "a#b"),
            r#"rename-session -t "a\#\#b""#,
            vec!["rename-session", "-t", "a##b"],
        ),
        (
            TmuxCommand::new("set-buffer").arg(";"),
            r#"set-buffer -- "\;""#,
            vec!["set-buffer", "--", r"\;"],
        ),
    ];
    for (cmd, line, argv) in cases {
        assert_eq!(cmd.line(), line);
        assert_eq!(cmd.to_string(), line);
        let got: Vec<_> = cmd
            .argv()
            .iter()
            .map(|a| a.to_str().expect("utf8"))
            .collect();
        assert_eq!(got, argv, "{line}");
    }
}

#[test]
fn builder_refuses_nul() {
    let nul = TmuxCommand::new("set-buffer").arg(b"a\0").arg("b");
    let err = nul.checked().expect_err("NUL refused");
    assert_eq!(err.code(), ErrorCode::InvalidInput);
    assert!(err.to_string().contains("set-buffer"), "{err}");
    assert!(
        TmuxCommand::new("set-buffer")
            .opt("-b", b"\0")
            .checked()
            .is_err()
    );
    assert!(
        TmuxCommand::new("set-buffer")
            .target("x\0")
            .checked()
            .is_err()
    );
    assert!(TmuxCommand::new("set-buffer").arg("ok").checked().is_ok());
}

#[test]
#[should_panic(expected = "is not '-' and letters or digits")]
fn builder_refuses_bad_flags() {
    let _ = TmuxCommand::new("send-keys").flag("-t; kill-server");
}

#[test]
fn hex_chunks() {
    let cmds = send_keys_hex(PaneId(7), b"hi\0\xff", 0);
    assert_eq!(cmds.len(), 1);
    assert_eq!(cmds[0].line(), r#"send-keys -t "%7" -H -- 68 69 00 ff"#);
    let argv: Vec<_> = cmds[0]
        .argv()
        .iter()
        .map(|a| a.to_str().expect("utf8"))
        .collect();
    assert_eq!(
        argv,
        ["send-keys", "-t", "%7", "-H", "--", "68", "69", "00", "ff"]
    );

    assert!(send_keys_hex(PaneId(1), b"", 0).is_empty());
    let data: Vec<u8> = (0..=255).cycle().take(2500).collect();
    let cmds = send_keys_hex(PaneId(1), &data, 1024);
    let sizes: Vec<usize> = cmds.iter().map(|c| c.argv().len() - 5).collect();
    assert_eq!(sizes, [1024, 1024, 452]);
    let cmds = send_keys_hex(PaneId(1), b"abc", 1);
    assert_eq!(cmds.len(), 3);
}

#[test]
fn the_direct_keys_line_is_the_commands_line_exactly() {
    let all: Vec<u8> = (0..=255).collect();
    let long: Vec<u8> = (0..=255).cycle().take(MAX_HEX_CHUNK).collect();
    let inputs: [&[u8]; 6] = [b"", b"a", b"\0", b"hi\r\n\x1b[A", &all, &long];
    for pane in [0, 7, 10, 42, 1_000_000, u32::MAX] {
        for bytes in inputs {
            assert_eq!(
                send_keys_hex_line(PaneId(pane), bytes),
                send_keys_hex_chunk(PaneId(pane), bytes).line(),
                "pane {pane}, {} bytes",
                bytes.len()
            );
        }
    }
}
