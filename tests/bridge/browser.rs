//! The page in a real browser: Debian's chromium, headless, driven through
//! the DevTools protocol over a WebSocket (the few commands needed, on the
//! test's own tokio-tungstenite; a CDP crate would compile thousands of
//! generated types for them). Opens the page with the token, opens a new
//! terminal, types `echo $((6*7))` Enter, reads xterm.js's buffer for `42`,
//! drops the connection and checks that the page resumes with nothing lost
//! or repeated, and saves a screenshot (every write going through the
//! front door's origin rules as the page sends it). A second test follows
//! a link with another owner's token: the page keeps its cookie, asks, and
//! switches when told. Without chromium it fails, everywhere
//! (scripts/install-deps installs it).

use std::path::PathBuf;

use base64::Engine;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_tungstenite::tungstenite::Message;

use super::{Served, WAIT};
use crate::support::within;

/// The chromium binary: `$CHROMIUM`, else Debian's.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("CHROMIUM")
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    path.is_file().then_some(path)
}

/// The chromium binary; a test that needs it fails without it, everywhere
/// (scripts/install-deps installs it; a skip would report green for a page
/// that was never tested).
pub(crate) fn chromium_required() -> PathBuf {
    chromium().unwrap_or_else(|| {
        panic!("chromium is missing at /usr/bin/chromium (set CHROMIUM): run scripts/install-deps")
    })
}

/// Where screenshots go, for a person to look at after the run.
pub(crate) fn shots_dir() -> PathBuf {
    let dir = std::env::temp_dir().join("tmux-engine-browser-test");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A headless chromium with one page, killed on drop.
pub(crate) struct Browser {
    child: tokio::process::Child,
    _profile: tempfile::TempDir,
    socket: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    session: String,
    next_id: u64,
}

impl Browser {
    /// Starts chromium and opens `url` in a new page.
    pub(crate) async fn open(binary: &PathBuf, url: &str) -> Browser {
        Browser::launch(binary, url, &["--disable-gpu"]).await
    }

    /// Starts chromium with `flags` besides the harness's own and opens
    /// `url` in a new page.
    pub(crate) async fn launch(binary: &PathBuf, url: &str, flags: &[&str]) -> Browser {
        let profile = crate::support::test_dir();
        let mut child = tokio::process::Command::new(binary)
            .args(flags)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--window-size=1000,700",
                "--remote-debugging-port=0",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("starting chromium");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let endpoint = tokio::time::timeout(WAIT, async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(url) = line.strip_prefix("DevTools listening on ") {
                    return url.trim().to_owned();
                }
            }
            panic!("chromium exited without a DevTools endpoint");
        })
        .await
        .expect("chromium printed no DevTools endpoint");
        // Keep draining stderr so chromium never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let (socket, _) = tokio_tungstenite::connect_async(endpoint).await.unwrap();
        let mut browser = Browser {
            child,
            _profile: profile,
            socket,
            session: String::new(),
            next_id: 0,
        };
        let target = browser
            .call("Target.createTarget", json!({"url": url}))
            .await;
        let attached = browser
            .call(
                "Target.attachToTarget",
                json!({"targetId": target["targetId"], "flatten": true}),
            )
            .await;
        browser.session = attached["sessionId"].as_str().unwrap().to_owned();
        browser
    }

    /// One DevTools command (to the page once attached); its result.
    pub(crate) async fn call(&mut self, method: &str, params: Value) -> Value {
        match self.try_call(method, params).await {
            Ok(result) => result,
            Err(answer) => panic!("{method}: {answer}"),
        }
    }

    /// One DevTools command; its result, or the error answer (an
    /// evaluation cut short by a navigation answers so).
    async fn try_call(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        let mut command = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            command["sessionId"] = Value::from(self.session.clone());
        }
        self.socket
            .send(Message::Text(command.to_string().into()))
            .await
            .unwrap();
        loop {
            let message = tokio::time::timeout(WAIT, self.socket.next())
                .await
                .expect("chromium did not answer")
                .expect("chromium closed the DevTools socket")
                .unwrap();
            let Message::Text(text) = message else {
                continue;
            };
            let answer: Value = serde_json::from_str(&text).unwrap();
            if answer["id"] == id {
                return match answer.get("error") {
                    None => Ok(answer["result"].clone()),
                    Some(_) => Err(answer),
                };
            }
        }
    }

    /// Evaluates `expression` in the page; its value.
    pub(crate) async fn eval(&mut self, expression: &str) -> Value {
        let result = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        assert!(
            result.get("exceptionDetails").is_none(),
            "{expression}: {result}"
        );
        result["result"]["value"].clone()
    }

    /// Waits until `expression` is true in the page (an evaluation lost
    /// to a navigation, or one that throws, counts as not yet).
    pub(crate) async fn until(&mut self, what: &str, expression: &str) {
        self.until_reporting(what, expression, "null").await;
    }

    /// [`until`](Self::until), saying what `report` evaluates to in the
    /// page when it gives up.
    pub(crate) async fn until_reporting(&mut self, what: &str, expression: &str, report: &str) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let answer = self
                .try_call(
                    "Runtime.evaluate",
                    json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
                )
                .await;
            if answer.is_ok_and(|result| result["result"]["value"] == Value::Bool(true)) {
                return;
            }
            if tokio::time::Instant::now() >= deadline {
                let state = self
                    .try_call(
                        "Runtime.evaluate",
                        json!({"expression": report, "returnByValue": true}),
                    )
                    .await
                    .map(|result| result["result"]["value"].clone());
                panic!("timed out waiting for {what} (the page: {state:?})");
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Waits until the terminal has the keyboard (xterm.js's textarea is
    /// focused), so what is typed next reaches it.
    pub(crate) async fn until_focused(&mut self) {
        self.until(
            "focus in xterm",
            "document.activeElement.classList.contains('xterm-helper-textarea')",
        )
        .await;
    }

    /// Types text into the focused element, then Enter.
    pub(crate) async fn type_line(&mut self, text: &str) {
        self.call("Input.insertText", json!({"text": text})).await;
        for kind in ["keyDown", "keyUp"] {
            let mut key =
                json!({"type": kind, "key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13});
            if kind == "keyDown" {
                key["text"] = Value::from("\r");
            }
            self.call("Input.dispatchKeyEvent", key).await;
        }
    }

    /// xterm.js's whole buffer, one string per line.
    pub(crate) async fn lines(&mut self) -> Vec<String> {
        let value = self
            .eval(
                "(() => { const b = tmuxEngine.term.buffer.active; const out = [];\
                 for (let i = 0; i < b.length; i++) out.push(b.getLine(i).translateToString(true));\
                 return out; })()",
            )
            .await;
        serde_json::from_value(value).unwrap()
    }
}

impl Browser {
    /// Waits until some line of xterm.js's buffer, trimmed, is `wanted`;
    /// its index in the buffer.
    pub(crate) async fn line(&mut self, wanted: &str) -> usize {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let lines = self.lines().await;
            if let Some(index) = lines.iter().position(|line| line.trim_end() == wanted) {
                return index;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no line {wanted:?}: {lines:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Waits for the shell's prompt (typed ahead, text is echoed before
    /// the prompt, which then shares a row with the output).
    pub(crate) async fn prompt(&mut self) {
        self.until(
            "the shell's prompt",
            "(() => { const b = tmuxEngine.term.buffer.active;\
             for (let i = 0; i < b.length; i++)\
             if (b.getLine(i).translateToString(true).trim() !== '') return true;\
             return false; })()",
        )
        .await;
    }

    /// One key press (down and up) with `modifiers` (DevTools' bits:
    /// 1 Alt, 2 Ctrl, 4 Meta, 8 Shift).
    pub(crate) async fn key(&mut self, key: &str, code: &str, vk: u32, modifiers: u32) {
        for kind in ["rawKeyDown", "keyUp"] {
            self.call(
                "Input.dispatchKeyEvent",
                json!({"type": kind, "key": key, "code": code,
                       "windowsVirtualKeyCode": vk, "modifiers": modifiers}),
            )
            .await;
        }
    }

    /// A mouse event at viewport coordinates.
    pub(crate) async fn mouse(&mut self, kind: &str, x: f64, y: f64) {
        let mut event = json!({"type": kind, "x": x, "y": y});
        if kind != "mouseMoved" {
            event["button"] = Value::from("left");
            event["clickCount"] = Value::from(1);
        }
        self.call("Input.dispatchMouseEvent", event).await;
    }

    /// A tap (press and release) in the middle of the element whose id
    /// is `id`, where a person's finger lands.
    pub(crate) async fn tap(&mut self, id: &str) {
        let centre = self
            .eval(&format!(
                "(() => {{ const r = document.getElementById({id:?}).getBoundingClientRect();\
                 return [r.left + r.width / 2, r.top + r.height / 2]; }})()"
            ))
            .await;
        let (x, y) = (centre[0].as_f64().unwrap(), centre[1].as_f64().unwrap());
        self.mouse("mousePressed", x, y).await;
        self.mouse("mouseReleased", x, y).await;
    }

    /// Saves a screenshot as `name` under [`shots_dir`]; its path.
    pub(crate) async fn screenshot(&mut self, name: &str) -> PathBuf {
        let shot = self
            .call("Page.captureScreenshot", json!({"format": "png"}))
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        assert!(png.starts_with(b"\x89PNG"));
        let path = shots_dir().join(name);
        std::fs::write(&path, &png).unwrap();
        eprintln!("screenshot: {}", path.display());
        path
    }

    /// Closes chromium and waits for it.
    pub(crate) async fn close(mut self) {
        self.session.clear();
        let _ = self.call("Browser.close", json!({})).await;
        let _ = tokio::time::timeout(WAIT, self.child.wait()).await;
    }
}

fn count(lines: &[String], wanted: &str) -> usize {
    lines
        .iter()
        .filter(|line| line.trim_end() == wanted)
        .count()
}

#[tokio::test]
async fn the_page_runs_a_terminal_and_resumes_after_a_drop() {
    let binary = chromium_required();
    within(async {
        let served = Served::start(&[]).await;
        let url = format!("{}/#code={}", served.base, served.code);
        let mut browser = Browser::open(&binary, &url).await;
        browser
            .until(
                "the page, signed in",
                "typeof tmuxEngine === 'object' && tmuxEngine.signedIn === true",
            )
            .await;
        // The code left the address bar; the session is in this origin's
        // storage, and no cookie holds anything.
        assert_eq!(
            browser
                .eval("[location.search, location.hash, document.cookie]")
                .await,
            json!(["", "", ""])
        );
        browser.eval("document.getElementById('new').click()").await;
        browser
            .until(
                "the hello",
                "tmuxEngine.stream !== null && tmuxEngine.socket !== null",
            )
            .await;
        browser.until_focused().await;
        // Typed only once the shell drew its prompt: text typed ahead is
        // echoed before the prompt, which then shares a row with the output.
        browser
            .until(
                "the shell's prompt",
                "(() => { const b = tmuxEngine.term.buffer.active;\
                 for (let i = 0; i < b.length; i++)\
                 if (b.getLine(i).translateToString(true).trim() !== '') return true;\
                 return false; })()",
            )
            .await;
        browser.type_line("echo $((6*7))").await;
        let deadline = tokio::time::Instant::now() + WAIT;
        while count(&browser.lines().await, "42") != 1 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no 42: {:?}",
                browser.lines().await
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }

        // Drop the connection; output made meanwhile must arrive once.
        let id = browser
            .eval("tmuxEngine.id")
            .await
            .as_str()
            .unwrap()
            .to_owned();
        browser.eval("tmuxEngine.drop()").await;
        let (status, _) = served
            .post(
                &format!("/api/terminals/{id}/send"),
                r#"{"text":"echo two-$((2+2))","submit":true}"#,
            )
            .await;
        assert_eq!(status, 200);
        browser
            .until(
                "the reconnect",
                "tmuxEngine.connects === 2 && tmuxEngine.socket?.readyState === 1",
            )
            .await;
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let lines = browser.lines().await;
            if count(&lines, "two-4") == 1 {
                assert_eq!(count(&lines, "42"), 1, "{lines:?}");
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no two-4: {lines:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        browser.type_line("echo three-$((1+2))").await;
        let deadline = tokio::time::Instant::now() + WAIT;
        while count(&browser.lines().await, "three-3") != 1 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "typing after the resume failed"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        // Resumed from the ring: the only repaint was the first one.
        assert_eq!(browser.eval("tmuxEngine.snapshots").await, 1);
        let lines = browser.lines().await;
        assert_eq!(
            (count(&lines, "42"), count(&lines, "two-4")),
            (1, 1),
            "{lines:?}"
        );

        let shot = browser
            .call("Page.captureScreenshot", json!({"format": "png"}))
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        let dir = std::env::temp_dir().join("tmux-engine-browser-test");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("page.png");
        std::fs::write(&path, &png).unwrap();
        assert!(png.starts_with(b"\x89PNG"));
        eprintln!("screenshot: {}", path.display());

        browser.session.clear();
        let _ = browser.call("Browser.close", json!({})).await;
        let _ = tokio::time::timeout(WAIT, browser.child.wait()).await;
        served
            .call(served.request(reqwest::Method::DELETE, &format!("/api/terminals/{id}")))
            .await;
    })
    .await;
}

#[tokio::test]
async fn a_link_for_another_owner_asks_and_the_page_switches() {
    let binary = chromium_required();
    within(async {
        let cli = crate::cli::Cli::new();
        let file = super::token_file(&cli, "alicealicealiceal alice\nbobbobbobbobbobbo bob\n");
        let mut served = Served::start_with(cli, &["--token-file", &file], &[]).await;
        let mut codes = Vec::new();
        for owner in ["alice", "bob"] {
            served.token = owner.repeat(6)[..17].to_owned();
            served
                .spawn(&format!(r#"{{"name":"{owner}-sh","command":["sh"]}}"#))
                .await;
            codes.push(served.sign_in_code("{}").await);
        }
        let listed = "[...document.querySelectorAll('#terminals li')].map(li => li.dataset.id && li.firstChild.textContent).join(',')";
        let mut browser =
            Browser::open(&binary, &format!("{}/#code={}", served.base, codes[0])).await;
        browser
            .until("alice's list", &format!("{listed} === 'alice-sh'"))
            .await;
        // Bob's link: the page stays alice's and asks.
        browser
            .eval(&format!("location.href = '{}/#code={}'", served.base, codes[1]))
            .await;
        browser
            .until("the switch notice", "!!document.getElementById('switch')")
            .await;
        let notice = browser
            .eval("document.getElementById('switch').textContent")
            .await;
        assert!(
            notice.as_str().unwrap().contains("Signed in as alice")
                && notice.as_str().unwrap().contains("Switch to bob"),
            "{notice}"
        );
        assert_eq!(browser.eval("location.hash").await, "");
        browser
            .until("alice's list again", &format!("{listed} === 'alice-sh'"))
            .await;
        browser
            .eval("document.querySelector('#switch button').click()")
            .await;
        browser
            .until(
                "bob's list",
                &format!("!document.getElementById('switch') && {listed} === 'bob-sh'"),
            )
            .await;
        browser.close().await;
        for owner in ["alice", "bob"] {
            served.token = owner.repeat(6)[..17].to_owned();
            served
                .call(served.request(reqwest::Method::DELETE, &format!("/api/terminals/{owner}-sh")))
                .await;
        }
    })
    .await;
}
