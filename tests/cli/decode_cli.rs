//! `tmux-engine decode` on recorded transcripts: golden JSON lines.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::support::fixture;

/// `tmux-engine decode [--stats]` of `input`, through the binary itself.
fn decode_json(input: &[u8], stats: bool) -> String {
    let mut decode = Command::new(env!("CARGO_BIN_EXE_tmux-engine"));
    decode.arg("decode");
    if stats {
        decode.arg("--stats");
    }
    let mut child = decode
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut stdin = child.stdin.take().expect("stdin piped");
    let input = input.to_vec();
    // Written from a thread: the output pipe fills while input is going in.
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().expect("decode ends");
    writer
        .join()
        .expect("writer")
        .expect("stdin takes the transcript");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).expect("JSON is UTF-8")
}

#[test]
fn v03_command_replies() {
    insta::assert_snapshot!(decode_json(&fixture("03-"), false), @r#"
    {"event":"reply","flags":1,"lines":["0: main* (1 panes) [80x24] [layout b25d,80x24,0,0,0] @0 (active)"],"number":266,"ok":true,"time":1796008296}
    {"event":"reply","flags":1,"lines":["version=3.3a client=client-19917"],"number":267,"ok":true,"time":1796008297}
    {"event":"reply","flags":1,"lines":["%0 19922 0 sh 0 2,0 80x24"],"number":268,"ok":true,"time":1796008297}
    {"event":"reply","flags":1,"lines":["history-limit 2000"],"number":269,"ok":true,"time":1796008297}
    {"event":"reply","flags":1,"lines":[],"number":270,"ok":true,"time":1796008298}
    "#);
}

#[test]
fn v06_output_escaping() {
    insta::assert_snapshot!(decode_json(&fixture("06-"), false), @r#"
    {"event":"reply","flags":1,"lines":[],"number":282,"ok":true,"time":1796008302}
    {"event":"session-window-changed","session":"$0","window":"@1"}
    {"event":"window-add","window":"@1"}
    {"event":"output","data":"QQlCXEMbWzFtYm9sZBtbMG0NCnV0Zjg6IMOpIOKCrCDwn5iADQpiYWQ6IP/+IGRlbDp/IG51bDoAIGJlbDoHIGVzYy1vbmx5OhsgZW5kDQolb3V0cHV0ICU5IGxvb2thbGlrZSBhbmQgJWVuZCAxIDIgMw0KbGl0ZXJhbCBiYWNrc2xhc2gtZGlnaXRzOiBcMDEyIFwxMzQNCm5vLW5ld2xpbmUtYXQtZW5k","pane":"%1"}
    "#);
}

#[test]
fn v31_layout_change_and_v10_subscriptions() {
    let layout = decode_json(&fixture("31-"), false);
    let first = layout
        .lines()
        .find(|l| l.contains("layout-change"))
        .expect("a layout change");
    insta::assert_snapshot!(first, @r#"{"event":"layout-change","flags":"","layout":"c19e,80x24,0,0[80x12,0,0,2,80x11,0,13,3]","visible_layout":"c19e,80x24,0,0[80x12,0,0,2,80x11,0,13,3]","window":"@2"}"#);
    let subs = decode_json(&fixture("10-"), false);
    let sess = subs
        .lines()
        .find(|l| l.contains(r#""name":"sess""#))
        .expect("the session subscription");
    insta::assert_snapshot!(sess, @r#"{"event":"subscription-changed","index":null,"name":"sess","pane":null,"session":"$0","value":"demo renamed","window":null}"#);
}

#[test]
fn v33_exit_reason_and_v24_error_reply() {
    insta::assert_snapshot!(decode_json(&fixture("33-"), false), @r#"
    {"event":"reply","flags":1,"lines":["20084"],"number":297,"ok":true,"time":1796008380}
    {"event":"exit","reason":"server exited unexpectedly"}
    "#);
    insta::assert_snapshot!(decode_json(&fixture("24-"), false), @r#"
    {"event":"reply","flags":0,"lines":["can't find session: nosuch"],"number":264,"ok":false,"time":1796008346}
    {"event":"exit","reason":null}
    "#);
}

#[test]
fn stats_for_v28_and_v13() {
    insta::assert_snapshot!(decode_json(&fixture("28-"), true), @r#"{"errors":0,"events":{"output":15,"reply":1,"window-add":1},"output_bytes":{"%2":9003}}"#);
    insta::assert_snapshot!(decode_json(&fixture("13-"), true), @r#"{"errors":0,"events":{"output":12,"reply":13},"output_bytes":{"%2":378}}"#);
}

#[test]
fn an_over_long_line_is_one_error_and_decoding_goes_on() {
    let mut input = b"%output %0 ".to_vec();
    input.extend(std::iter::repeat_n(
        b'x',
        tmux_engine::control::DEFAULT_MAX_LINE_LENGTH + 1,
    ));
    input.extend_from_slice(b"\n%window-add @1\n");
    let out = decode_json(&input, false);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{}", &out[..out.len().min(400)]);
    assert!(
        lines[0].starts_with(r#"{"event":"error","kind":"line-too-long","line":"%output %0 xxx"#),
        "{}",
        lines[0]
    );
    // The line's length: `%output %0 ` (11 bytes) and the payload.
    let len = tmux_engine::control::DEFAULT_MAX_LINE_LENGTH + 1 + 11;
    assert!(
        lines[0].contains(&format!("line of {len} bytes is over the length limit")),
        "{}",
        &lines[0][lines[0].len().saturating_sub(200)..]
    );
    assert_eq!(lines[1], r#"{"event":"window-add","window":"@1"}"#);
}
