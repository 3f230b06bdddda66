//! The page shows who else is typing into the open terminal right now:
//! serve tells every viewer (`{"type":"typing","who":[…]}`) when the
//! others typing change, and the page puts them in a badge. In headless
//! Chromium: a share link's holder types over its own WebSocket and the
//! owner's page names it, then drops it once it has been quiet; the page's
//! own typing reaches the holder, never the page's own badge.

use serde_json::Value;

use super::browser::{Browser, chromium_required};
use super::{Frame, Served, Ws, ws_request};
use crate::support::within;

/// Reads `ws` until a typing frame; its `who`.
async fn typing(ws: &mut Ws) -> Vec<String> {
    loop {
        if let Frame::Text(frame) = ws.next().await
            && frame["type"] == "typing"
        {
            return serde_json::from_value(frame["who"].clone()).unwrap();
        }
    }
}

#[tokio::test]
async fn the_page_shows_who_else_is_typing() {
    let binary = chromium_required();
    within(async {
        let served = Served::start(&[]).await;
        served.spawn(r#"{"name":"pair","command":["cat"]}"#).await;
        let owner = served.get("/api/session").await.1["owner"]
            .as_str()
            .unwrap()
            .to_owned();
        let url = format!("{}&t=pair", served.sign_in_url("{}").await);
        let mut browser = Browser::open(&binary, &url).await;
        browser
            .until(
                "pair open",
                "typeof tmuxEngine === 'object' && tmuxEngine.name === 'pair' \
                 && document.getElementById('status').textContent === 'connected'",
            )
            .await;

        // A share link's holder joins and types: the page names it.
        let code = served.sign_in_code(r#"{"terminal":"pair"}"#).await;
        let (status, signed) = served
            .post("/api/sign-in", &format!(r#"{{"code":"{code}"}}"#))
            .await;
        assert_eq!(status, 200, "{signed}");
        let session = signed["session"].as_str().unwrap();
        let mut guest = Ws::connect(ws_request(&served.ws_url("pair", ""), session)).await;
        assert_eq!(guest.text().await["type"], "hello");
        let name = format!("{owner} (share link)");
        guest.input(b"hello from a guest").await;
        browser
            .until(
                "the guest's badge",
                &format!(
                    "JSON.stringify(tmuxEngine.typing) === JSON.stringify([{name:?}]) \
                     && !document.getElementById('typing').hidden \
                     && document.getElementById('typing').textContent === '{name} is typing'"
                ),
            )
            .await;
        browser.screenshot("typing.png").await;
        // Quiet for 2 s: off the badge.
        browser
            .until(
                "the badge gone",
                "tmuxEngine.typing.length === 0 && document.getElementById('typing').hidden",
            )
            .await;

        // The page types: the guest is told, the page's badge stays empty.
        browser.until_focused().await;
        browser.type_line("from the page").await;
        assert_eq!(typing(&mut guest).await, [owner]);
        assert_eq!(
            browser.eval("tmuxEngine.typing.length").await,
            Value::from(0),
            "the page never names itself"
        );
        assert!(typing(&mut guest).await.is_empty(), "off once quiet");
        guest.close().await;
        browser.close().await;
    })
    .await;
}
