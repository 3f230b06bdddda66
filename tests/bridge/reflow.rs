//! A viewer's screen after a resize is tmux's (issue 43): a terminal that
//! printed a long `ls --color` line, a green `done` and `htop --version`
//! at 80 columns, opened in the page in headless chromium at 390x844 (the
//! phone layout narrows it), then widened and narrowed again; each time
//! the rows xterm.js shows equal `capture-pane`'s (the `screen` route).

use serde_json::{Value, json};

use super::browser::{Browser, chromium_required};
use super::{Served, WAIT};
use crate::support::within;

/// What the terminal printed before the page opened: a line longer than a
/// phone's width with colours (as `ls --color` prints it), a green word,
/// a version line, then a shell's prompt.
const PRINTED: &str = r#"{"name":"p","command":["sh","-c","printf '\\033[01;34mbin\\033[0m  \\033[01;34mboot\\033[0m  \\033[01;34mdev\\033[0m  \\033[01;34metc\\033[0m  \\033[01;34mhome\\033[0m  \\033[01;36mlib\\033[0m  \\033[01;34mmedia\\033[0m  \\033[01;34mmnt\\033[0m  \\033[01;34mopt\\033[0m  \\033[01;34mshare\\033[0m  \\033[01;34msrc\\033[0m\\n\\033[32mdone\\033[0m\\nhtop 3.2.2\\n'; exec $0","SHELL"]}"#;

/// The rows xterm.js shows (its viewport at the bottom), right-trimmed.
const SHOWN: &str = "(() => { const t = tmuxEngine.term; const b = t.buffer.active; const out = [];\
    for (let i = 0; i < t.rows; i++) { const line = b.getLine(b.baseY + i);\
    out.push(line ? line.translateToString(true) : ''); }\
    return { cols: t.cols, rows: t.rows, lines: out,\
             cursor: [b.cursorX, b.cursorY] }; })()";

/// tmux's own screen: its rows (right-trimmed), size and cursor.
async fn captured(served: &Served) -> Value {
    let (status, screen) = served.get("/api/terminals/p/screen").await;
    assert_eq!(status, 200, "{screen}");
    let lines: Vec<Value> = screen["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|line| Value::from(line.as_str().unwrap().trim_end()))
        .collect();
    json!({"cols": screen["cols"], "rows": screen["rows"], "lines": lines,
           "cursor": screen["cursor"]})
}

/// Waits until the page shows tmux's screen exactly (size, rows, cursor),
/// both read anew each turn: the resize, tmux's reflow, the shell's redraw
/// and the page's repaint all settle on their own time.
async fn shows_tmux_screen(browser: &mut Browser, served: &Served, what: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let tmux = captured(served).await;
        let mut page = browser.eval(SHOWN).await;
        // tmux's screen is padded to its rows; a trailing blank row of the
        // page is the same.
        // and both are compared right-trimmed (xterm.js keeps a written
        // space, tmux's capture does not).
        if let Some(lines) = page["lines"].as_array_mut() {
            lines.truncate(tmux["lines"].as_array().map_or(0, Vec::len));
            for line in lines.iter_mut() {
                *line = Value::from(line.as_str().unwrap_or_default().trim_end());
            }
        }
        if page == tmux && tmux["cols"].as_u64() == page["cols"].as_u64() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: the page shows\n{page:#}\nwhile tmux shows\n{tmux:#}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

async fn set_size(browser: &mut Browser, width: u32, height: u32) {
    browser
        .call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600}),
        )
        .await;
}

#[tokio::test]
async fn a_narrowed_viewer_shows_the_screen_tmux_shows() {
    resized_viewers_show_the_screen_tmux_shows("sh").await;
}

/// bash redraws its prompt on SIGWINCH: those bytes land on the repaint.
#[tokio::test]
async fn a_narrowed_viewer_of_bash_shows_the_screen_tmux_shows() {
    resized_viewers_show_the_screen_tmux_shows("bash").await;
}

async fn resized_viewers_show_the_screen_tmux_shows(shell: &str) {
    let binary = chromium_required();
    within(async {
        let served = Served::start(&[]).await;
        served.spawn(&PRINTED.replace("SHELL", shell)).await;
        let mut screen = captured(&served).await;
        let deadline = tokio::time::Instant::now() + WAIT;
        // The shell's prompt (`$ ` or `# `) on the row after the version.
        while screen["lines"][3].as_str().is_none_or(str::is_empty) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no prompt: {screen}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            screen = captured(&served).await;
        }
        assert_eq!(screen["cols"], 80, "{screen}");
        let mut browser = Browser::open(&binary, "about:blank").await;
        set_size(&mut browser, 390, 844).await;
        let code = served.sign_in_code("{}").await;
        browser
            .call(
                "Page.navigate",
                json!({"url": format!("{}/#code={code}&t=p", served.base)}),
            )
            .await;
        browser
            .until(
                "the terminal, open and narrowed",
                "typeof tmuxEngine === 'object' && tmuxEngine.socket?.readyState === 1 \
                 && tmuxEngine.stream !== null && tmuxEngine.term.cols < 60",
            )
            .await;
        shows_tmux_screen(&mut browser, &served, "opened at 390x844").await;
        browser
            .screenshot(&format!("reflow-narrow-{shell}.png"))
            .await;
        set_size(&mut browser, 1000, 700).await;
        browser
            .until("the terminal, wider", "tmuxEngine.term.cols > 80")
            .await;
        shows_tmux_screen(&mut browser, &served, "widened to 1000x700").await;
        set_size(&mut browser, 390, 844).await;
        browser
            .until("the terminal, narrow again", "tmuxEngine.term.cols < 60")
            .await;
        shows_tmux_screen(&mut browser, &served, "narrowed again to 390x844").await;
        browser.close().await;
    })
    .await;
}
