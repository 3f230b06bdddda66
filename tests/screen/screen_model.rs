//! The screen model against tmux (issue 45): each sequence that `vt100`
//! 0.18 got wrong, and what must keep working (wide characters, combining
//! marks, 256/24-bit colour, the alternate screen), is fed to a real tmux
//! pane; tmux's capture must show the expected screen and the model must
//! show tmux's capture, text, attributes and cursor.

use std::time::Duration;

use tmux_engine::Terminal;
use tmux_engine::screen::Screen;

use crate::support::{live, tmux};

/// Name, bytes, the rows tmux shows (trailing blank rows left out).
const CASES: &[(&str, &[u8], &[&str])] = &[
    ("IND (ESC D)", b"ab\x1bDc", &["ab", "  c"]),
    ("NEL (ESC E)", b"ab\x1bEc", &["ab", "c"]),
    ("clear on DECCOLM", b"junk\r\nmore\x1b[?3hX", &["X"]),
    (
        "autowrap off (CSI ? 7 l)",
        b"\x1b[?7labcdefghijklmnopqrstuvwxyz",
        &["abcdefghijklmnopqrsz"],
    ),
    (
        "tab stop set (ESC H)",
        b"\x1b[3g\x1b[1;6H\x1bH\r\tX",
        &["     X"],
    ),
    (
        "tab stop cleared (CSI g)",
        b"\x1b[1;9H\x1b[g\r\tX\tY",
        &["                X  Y"],
    ),
    (
        "DEC line drawing (ESC ( 0)",
        b"\x1b(0lqqk\x1b(B\r\n\x1b(0x  x\x1b(Bok",
        &["\u{250c}\u{2500}\u{2500}\u{2510}", "\u{2502}  \u{2502}ok"],
    ),
    (
        "insert mode (CSI 4 h)",
        b"abc\r\x1b[4h\x1b[7mXY\x1b[m\x1b[4l",
        &["XYabc"],
    ),
    ("CSI s / CSI u", b"ab\x1b[s\r\ncd\x1b[uX", &["abX", "cd"]),
    ("RI (ESC M)", b"\x1b[2;3Ha\x1bMb", &["   b", "  a"]),
    (
        "DECSC / DECRC with attributes",
        b"\x1b[1;31mab\x1b7\x1b[m\r\ncd\x1b8X",
        &["abX", "cd"],
    ),
    (
        "wide, combining, 256 and 24-bit colour",
        "\x1b[38;5;208m\u{4e2d}\x1b[48;2;1;2;3me\u{301}\x1b[m!".as_bytes(),
        &["\u{4e2d}e\u{301}!"],
    ),
    (
        "alternate screen",
        b"main\x1b[?1049h\x1b[4mal\x1b[1mt\x1b[m",
        &["    alt"],
    ),
];

fn rows(screen: &Screen) -> Vec<String> {
    let mut rows: Vec<String> = screen.rows().map(str::to_owned).collect();
    while rows.last().is_some_and(String::is_empty) {
        rows.pop();
    }
    rows
}

/// What must be equal: text, attributes, cursor, screen mode.
fn seen(screen: &Screen) -> (Vec<String>, Vec<String>, (u16, u16), bool) {
    let cursor = screen.cursor();
    (
        rows(screen),
        screen.attributed_rows(),
        (cursor.row, cursor.col),
        screen.alternate_screen(),
    )
}

#[tokio::test]
async fn the_model_renders_each_sequence_as_tmux_does() {
    live(async |tmp| {
        let mut wrong = Vec::new();
        for (i, (name, bytes, want)) in CASES.iter().enumerate() {
            let file = tmp.path().join(format!("case{i}"));
            std::fs::write(&file, bytes).expect("write case");
            let term = Terminal::builder()
                .tmux(tmux())
                .runtime_dir(tmp.path().join("rt"))
                .size(20, 4)
                .command(["sh", "-c", "cat \"$1\"; exec sleep 600", "sh"])
                .arg(&file)
                .start()
                .await
                .expect("start");
            // Both sides consume the same bytes; poll until tmux shows the
            // expected screen and the model shows tmux's, or the deadline.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            let (model, real) = loop {
                let real = term.tmux_screen().await.expect("capture");
                let model = term.screen().await.expect("screen");
                let done = rows(&real) == *want && seen(&model) == seen(&real);
                if done || tokio::time::Instant::now() > deadline {
                    break (model, real);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            if rows(&real) != *want {
                wrong.push(format!(
                    "{name}: tmux shows {:?}, expected {want:?}",
                    rows(&real)
                ));
            }
            if seen(&model) != seen(&real) {
                wrong.push(format!(
                    "{name}: the model shows\n{:?}\ntmux shows\n{:?}",
                    seen(&model),
                    seen(&real)
                ));
            }
            term.kill().await.expect("kill");
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    })
    .await;
}
