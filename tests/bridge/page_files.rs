//! The page's files (issue 30): a file dropped on the terminal lands in
//! its working directory (a Replace prompt for a name already there, a line
//! in the page, nothing typed), and comes back through "Download…" and
//! through the link the shell's `te-download` prints.

use std::time::Duration;

use serde_json::{Value, json};

use super::Served;
use crate::support::within;

/// Drops `text` as a file named `name` on the page's terminal.
fn drop_script(name: &str, text: &str) -> String {
    format!(
        "(() => {{ const data = new DataTransfer();\
         data.items.add(new File([{text:?}], {name:?}));\
         document.getElementById('stage').dispatchEvent(new DragEvent('drop',\
         {{ dataTransfer: data, bubbles: true, cancelable: true }})); }})()"
    )
}

#[tokio::test]
async fn the_page_takes_a_dropped_file_and_downloads_it_back() {
    let binary = super::browser::chromium_required();
    within(async {
        let served = Served::start(&[]).await;
        let work = tempfile::tempdir().unwrap();
        // The integrated shell: `te-download` is in its rc.
        served
            .spawn(&json!({"name": "f", "cwd": work.path().to_str().unwrap()}).to_string())
            .await;
        let code = served.sign_in_code("{}").await;
        let mut browser =
            super::browser::Browser::open(&binary, &format!("{}/#code={code}&t=f", served.base))
                .await;
        browser
            .until(
                "the terminal, open",
                "typeof tmuxEngine === 'object' && tmuxEngine.socket?.readyState === 1 \
                 && tmuxEngine.stream !== null",
            )
            .await;
        browser.prompt().await;
        browser.eval(&drop_script("dropped.txt", "first\n")).await;
        let landed = work.path().join("dropped.txt");
        let said = format!("Uploaded {}", landed.display());
        browser
            .until(
                "the upload's line in the page",
                &format!("document.getElementById('transfer').textContent.startsWith({said:?})"),
            )
            .await;
        assert_eq!(std::fs::read(&landed).unwrap(), b"first\n");
        // Not typed into the program: its screen has no such line.
        let (_, screen) = served.get("/api/terminals/f/screen").await;
        assert!(!screen.to_string().contains("Uploaded"), "{screen}");
        // The same name again: a prompt, and Replace replaces.
        browser.eval(&drop_script("dropped.txt", "second\n")).await;
        browser
            .until(
                "the overwrite prompt",
                "[...document.querySelectorAll('#transfer button')].some(b => b.textContent === 'Replace')",
            )
            .await;
        browser.screenshot("upload-prompt.png").await;
        assert_eq!(std::fs::read(&landed).unwrap(), b"first\n");
        browser
            .eval("[...document.querySelectorAll('#transfer button')].find(b => b.textContent === 'Replace').click()")
            .await;
        browser
            .until(
                "the replace",
                "document.getElementById('transfer').textContent.startsWith('Replaced ')",
            )
            .await;
        assert_eq!(std::fs::read(&landed).unwrap(), b"second\n");
        // Back through Download…: the prompt, a relative path.
        browser.eval("document.getElementById('download').click()").await;
        browser
            .eval(
                "(() => { document.getElementById('download-path').value = 'dropped.txt';\
                 document.getElementById('download-form').requestSubmit(); })()",
            )
            .await;
        browser
            .until(
                "the download",
                "tmuxEngine.lastDownload?.path === 'dropped.txt'",
            )
            .await;
        assert_eq!(
            browser.eval("tmuxEngine.lastDownload.blob.text()").await,
            "second\n"
        );
        // The download's line lies over the terminal's top rows, where
        // the link will be, until its 15 s timer hides it: a tap on the
        // line dismisses it now, as a person would.
        browser.tap("transfer").await;
        browser
            .until(
                "the download's line dismissed",
                "document.getElementById('transfer').hidden",
            )
            .await;
        // And through the link `te-download` prints: a click on it.
        browser.eval("tmuxEngine.lastDownload = null").await;
        browser.eval("tmuxEngine.term.focus()").await;
        browser.type_line("te-download dropped.txt").await;
        let row = browser.line("dropped.txt").await;
        let centre = browser
            .eval(&format!(
                "(() => {{ const t = tmuxEngine.term; const b = t.buffer.active;\
                 const r = document.querySelector('#screen .xterm-screen').getBoundingClientRect();\
                 const cell = r.height / t.rows; const y = {row} - b.viewportY;\
                 return [r.left + cell, r.top + (y + 0.5) * cell]; }})()"
            ))
            .await;
        let (x, y) = (centre[0].as_f64().unwrap(), centre[1].as_f64().unwrap());
        // Moved until xterm.js shows the link (as page.rs's link test).
        let deadline = tokio::time::Instant::now() + super::WAIT;
        for wiggle in [0.0, 1.0].into_iter().cycle() {
            browser.mouse("mouseMoved", x + wiggle, y).await;
            if browser
                .eval("!!document.querySelector('.xterm-cursor-pointer')")
                .await
                == Value::Bool(true)
            {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no link under the mouse"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        browser.mouse("mousePressed", x, y).await;
        browser.mouse("mouseReleased", x, y).await;
        let uri = format!("file://{}", landed.display());
        browser
            .until(
                "the link's download",
                &format!(
                    "tmuxEngine.lastLink === {uri:?} && tmuxEngine.lastDownload?.path === {:?}",
                    landed.display().to_string()
                ),
            )
            .await;
        assert_eq!(
            browser.eval("tmuxEngine.lastDownload.blob.text()").await,
            "second\n"
        );
        browser.screenshot("downloaded.png").await;
        browser.close().await;
    })
    .await;
}
