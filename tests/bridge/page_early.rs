//! The page's first paint (issue 27): a kept session's `#t=NAME` opens the
//! terminal's WebSocket at once, before the session check and the list
//! answer, and still fails closed. Headless chromium (the harness in
//! `browser.rs`), with a script injected before the page's own that notes,
//! in order, every `fetch` made and answered and every socket made and
//! closed. Three visits after a first sign-in: the kept terminal (its
//! socket made before any answer, its hello naming the id the list marks,
//! typing reaching it), a `#t` naming no terminal (the welcome and the
//! error, the fragment kept), and a revoked session (the sign-in panel, the
//! socket refused with 4401, not a byte of the terminal shown).

use serde_json::{Value, json};

use super::Served;
use super::browser::{Browser, chromium_required};
use crate::support::within;

/// Injected before each document's own scripts: `window.__order`, what the
/// page asked of the network, in order; `window.__attach`, the last
/// socket's address.
const RECORD: &str = r#"(() => {
  const order = window.__order = [];
  const fetch0 = window.fetch;
  window.fetch = function (input, init) {
    const path = new URL(String(input), location.href).pathname;
    order.push(`fetch ${path}`);
    return fetch0.call(this, input, init).then((r) => { order.push(`answer ${path}`); return r; });
  };
  const Socket = window.WebSocket;
  window.WebSocket = class extends Socket {
    constructor(...args) {
      super(...args);
      order.push("socket");
      window.__attach = String(args[0]);
      this.addEventListener("close", (e) => order.push(`close ${e.code}`));
    }
  };
})()"#;

/// Navigates to `url` as a new document (a fragment alone would not load
/// the page again).
async fn visit(browser: &mut Browser, url: &str) {
    browser
        .call("Page.navigate", json!({"url": "about:blank"}))
        .await;
    browser
        .until("about:blank", "location.href === 'about:blank'")
        .await;
    browser.call("Page.navigate", json!({"url": url})).await;
    browser
        .until("the page's scripts", "typeof tmuxEngine === 'object'")
        .await;
}

/// The page's record of its network requests.
async fn order(browser: &mut Browser) -> Vec<String> {
    serde_json::from_value(browser.eval("window.__order").await).unwrap()
}

#[tokio::test]
async fn a_kept_session_opens_its_terminal_at_once_and_still_fails_closed() {
    let binary = chromium_required();
    within(async {
        let served = Served::start(&[]).await;
        let kept = served
            .spawn(r#"{"name":"kept","command":["sh","-c","echo KEPT; exec cat"]}"#)
            .await;
        let id = kept["id"].as_str().unwrap().to_owned();
        // The first visit: a link's code, no early socket (nothing kept).
        let code = served.sign_in_code("{}").await;
        let mut browser =
            Browser::open(&binary, &format!("{}/#code={code}&t=kept", served.base)).await;
        browser
            .until("the page's scripts", "typeof tmuxEngine === 'object'")
            .await;
        browser.line("KEPT").await;
        browser.call("Page.enable", json!({})).await;
        browser
            .call(
                "Page.addScriptToEvaluateOnNewDocument",
                json!({"source": RECORD}),
            )
            .await;

        // The next visit: the socket is made before anything is answered
        // (it used to wait for the session check and two lists). At
        // 1200×700 the bar's buttons an open terminal shows take a row
        // from the screen (see below).
        browser
            .call(
                "Emulation.setDeviceMetricsOverride",
                json!({"width": 1200, "height": 700, "deviceScaleFactor": 1, "mobile": false}),
            )
            .await;
        visit(&mut browser, &format!("{}/#t=kept", served.base)).await;
        browser.line("KEPT").await;
        // The attach asked for the size the page keeps (fitted with the
        // bar's buttons an open terminal shows): it once asked for the
        // size before them, and the resize right after made tmux reflow
        // the whole history and send a second snapshot (issue 49).
        let asked = browser
            .eval(
                "(() => { const q = new URL(window.__attach).searchParams;                 return [Number(q.get('cols')), Number(q.get('rows'))]; })()",
            )
            .await;
        let kept_size = browser
            .eval("[tmuxEngine.term.cols, tmuxEngine.term.rows]")
            .await;
        assert_eq!(asked, kept_size, "the attach's size is the page's");
        let (_, screen) = served.get("/api/terminals/kept/screen").await;
        assert_eq!(json!([screen["cols"], screen["rows"]]), kept_size, "{screen}");
        let seen = order(&mut browser).await;
        let socket = seen.iter().position(|e| e == "socket");
        let answer = seen.iter().position(|e| e.starts_with("answer "));
        assert!(
            socket.is_some() && answer.is_none_or(|a| socket < Some(a)),
            "{seen:?}"
        );
        // Its hello named the id: the list marks the entry, and typing
        // reaches the terminal.
        browser
            .until(
                "the id from the hello",
                &format!(
                    "tmuxEngine.id === {id:?} && tmuxEngine.name === 'kept'\
                     && document.querySelector('#terminals li.open')?.dataset.name === 'kept'"
                ),
            )
            .await;
        browser.until_focused().await;
        browser.type_line("typed").await;
        browser.line("typed").await;
        assert_eq!(browser.eval("location.hash").await, "#t=kept");
        let sockets = order(&mut browser)
            .await
            .iter()
            .filter(|e| *e == "socket")
            .count();
        assert_eq!(sockets, 1, "one socket, not a second once listed");

        // A `#t` that names no terminal of ours: the welcome and the
        // error, as before, the fragment kept.
        visit(&mut browser, &format!("{}/#t=missing", served.base)).await;
        browser
            .until(
                "the welcome and the error",
                "document.getElementById('error').textContent === 'no terminal missing'\
                 && !document.body.classList.contains('opened') && tmuxEngine.id === null",
            )
            .await;
        assert_eq!(browser.eval("location.hash").await, "#t=missing");

        // A session that ended (revoked here): the early socket is refused
        // (4401, or closed by the page first) and the sign-in panel shows;
        // nothing of the terminal does.
        let session = browser
            .eval("localStorage.getItem('tmux-engine.session:/')")
            .await;
        let revoked = reqwest::Client::new()
            .delete(format!("{}/api/session", served.base))
            .bearer_auth(session.as_str().unwrap())
            .send()
            .await
            .unwrap();
        assert!(revoked.status().is_success(), "{revoked:?}");
        visit(&mut browser, &format!("{}/#t=kept", served.base)).await;
        browser
            .until(
                "the sign-in panel, the socket refused",
                "!document.getElementById('signin').hidden\
                 && !document.body.classList.contains('opened')\
                 && window.__order.some((e) => e.startsWith('close '))",
            )
            .await;
        let lines = browser.lines().await;
        assert!(lines.iter().all(|l| l.trim().is_empty()), "{lines:?}");
        assert_eq!(browser.eval("tmuxEngine.id").await, Value::Null);
        browser.screenshot("early-signed-out.png").await;
        browser.close().await;
    })
    .await;
}
