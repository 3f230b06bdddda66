//! Sign-in as a second person, a replayed link and a hostile local page
//! meet it: the printed link works once (a second browser profile that
//! replays it gets the sign-in page, never access), a page on another port
//! of 127.0.0.1 receives nothing of serve's credentials and cannot act,
//! `tmux-engine link` mints, lists and revokes links through the API, and
//! codes expire.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::browser::{Browser, chromium_required};
use super::{Served, WAIT};
use crate::support::within;

const SIGNED_IN: &str = "typeof tmuxEngine === 'object' && tmuxEngine.signedIn === true";
const SIGN_IN_PAGE: &str =
    "typeof tmuxEngine === 'object' && !document.getElementById('signin').hidden";

#[tokio::test]
async fn the_printed_link_works_once_and_a_replay_gets_the_sign_in_page() {
    let binary = chromium_required();
    within(async {
        let served = Served::start(&[]).await;
        served.spawn(r#"{"name":"mine","command":["sh"]}"#).await;
        let url = format!("{}/#code={}", served.base, served.code);
        let mut first = Browser::open(&binary, &url).await;
        first.until("the first browser signed in", SIGNED_IN).await;
        first
            .until(
                "its list",
                "document.querySelector('#terminals li')?.dataset.name === 'mine'",
            )
            .await;
        // A reload keeps the session (the origin's storage), no code needed.
        first.eval("location.reload()").await;
        first.until("signed in after a reload", SIGNED_IN).await;
        // Another profile (a second browser, or the history of the first)
        // replaying the printed link: the sign-in page, nothing listed.
        let mut second = Browser::open(&binary, &url).await;
        second.until("the sign-in page", SIGN_IN_PAGE).await;
        let why = second
            .eval("document.getElementById('signin-why').textContent")
            .await;
        assert!(
            why.as_str().unwrap().contains("already used or has expired"),
            "{why}"
        );
        assert_eq!(
            second
                .eval("[tmuxEngine.signedIn === true, document.querySelectorAll('#terminals li').length, Object.keys(localStorage).filter(k => k.startsWith('tmux-engine.session')).length]")
                .await,
            json!([false, 0, 0])
        );
        second.screenshot("sign-in.png").await;
        // A fresh link pasted into the panel signs the second one in.
        let fresh = served.sign_in_url("{}").await;
        second
            .eval(&format!(
                "document.getElementById('signin-code').value = '{fresh}';\
                 document.querySelector('#signin-form button').click()"
            ))
            .await;
        second.until("the second browser signed in", SIGNED_IN).await;
        second.close().await;
        first.close().await;
        served
            .call(served.request(reqwest::Method::DELETE, "/api/terminals/mine"))
            .await;
    })
    .await;
}

/// A local web server on another port: records every request head it
/// gets and answers with `page` (for `/`) or 404.
async fn evil_server(page: String) -> (String, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (heads, received) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (heads, page) = (heads.clone(), page.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).into_owned();
                let body = if head.starts_with("GET / ") {
                    page
                } else {
                    String::new()
                };
                let status = if body.is_empty() {
                    "404 Not Found"
                } else {
                    "200 OK"
                };
                let answer = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: text/html\r\ncontent-length: {}\r\n\
                     connection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = heads.send(head);
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    (base, received)
}

#[tokio::test]
async fn a_page_on_another_port_gets_no_credential_and_cannot_act() {
    let binary = chromium_required();
    within(async {
        let served = Served::start(&[]).await;
        let serve = served.base.clone();
        // What a hostile page can try from a browser: read the list with
        // whatever the browser adds, a form-like spawn, and a viewer.
        let page = format!(
            r#"<!doctype html><script>
            window.results = {{}};
            fetch("{serve}/api/terminals", {{credentials: "include"}})
              .then(r => results.list = r.status, e => results.list = "blocked");
            fetch("{serve}/api/terminals", {{method: "POST", mode: "no-cors", credentials: "include",
              headers: {{"content-type": "text/plain"}}, body: '{{"command":["sh","-c","id"]}}'}})
              .then(r => results.spawn = r.type, e => results.spawn = "blocked");
            const ws = new WebSocket("{ws}/api/terminals/x/attach", ["tmux-engine"]);
            ws.onclose = (e) => results.ws = e.code;
            </script>"#,
            ws = serve.replace("http://", "ws://")
        );
        let (evil, mut heads) = evil_server(page).await;
        let mut browser =
            Browser::open(&binary, &format!("{serve}/#code={}", served.code)).await;
        browser.until("signed in", SIGNED_IN).await;
        let session = browser
            .eval("localStorage.getItem(Object.keys(localStorage).find(k => k.startsWith('tmux-engine.session')))")
            .await;
        let session = session.as_str().unwrap().to_owned();
        // The same browser visits the other port.
        browser
            .eval(&format!("location.href = '{evil}/'"))
            .await;
        browser
            .until(
                "the hostile page's tries",
                "typeof results === 'object' && results.list !== undefined \
                 && results.spawn !== undefined && results.ws !== undefined",
            )
            .await;
        let results = browser.eval("results").await;
        assert!(
            results["list"] == "blocked" || results["list"] == 401,
            "{results}"
        );
        assert!(
            results["ws"] == 4401 || results["ws"] == 4403 || results["ws"] == 1006,
            "{results}"
        );
        // Nothing the browser sent the other port holds serve's secrets,
        // and the hostile page cannot read serve's storage.
        let mut seen = 0;
        while let Ok(head) = heads.try_recv() {
            seen += 1;
            let lower = head.to_ascii_lowercase();
            assert!(
                !lower.contains("tmux_engine")
                    && !head.contains(&served.token)
                    && !head.contains(&session),
                "the other port got: {head}"
            );
        }
        assert!(seen >= 1, "the hostile page was never loaded");
        assert_eq!(
            browser
                .eval("Object.keys(localStorage).length + document.cookie.length")
                .await,
            json!(0)
        );
        browser.close().await;
        let (_, list) = served.get("/api/terminals").await;
        assert_eq!(list, json!([]), "the hostile page spawned something");
    })
    .await;
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test]
async fn link_mints_lists_and_revokes_through_the_api() {
    within(async {
        let served = Served::start(&[]).await;
        // Its body is an object, as its schema says: serde alone read `[]`
        // as a request with every default (schemathesis found it).
        for body in ["[]", "[true]", "7"] {
            for path in ["/api/links", "/api/sign-in"] {
                let (status, answer) = served.post(path, body).await;
                assert_eq!(status, 400, "{path} {body}: {answer}");
                assert_eq!(answer["error"]["code"], "INVALID_INPUT", "{answer}");
            }
        }
        let http = reqwest::Client::new();
        let sign_in = |code: String| {
            http.post(format!("{}/api/sign-in", served.base))
                .header("content-type", "application/json")
                .body(json!({ "code": code }).to_string())
                .send()
        };
        let code_of = |line: &str| {
            let (base, code) = line.trim().split_once("/#code=").unwrap();
            assert_eq!(base, served.base, "{line}");
            code.to_owned()
        };
        // The serve is found through its state directory; the token from it.
        let minted = served.cli.run(&["link", "--read-only", "--expires", "2h"]);
        let line = String::from_utf8_lossy(&minted.stdout).into_owned();
        assert!(
            minted.status.success(),
            "{line} {}",
            String::from_utf8_lossy(&minted.stderr)
        );
        let answer = sign_in(code_of(&line)).await.unwrap();
        assert_eq!(answer.status().as_u16(), 200);
        let session: Value = answer.json().await.unwrap();
        assert_eq!(session["read_only"], true, "{session}");
        let secret = session["session"].as_str().unwrap().to_owned();
        let (status, _) = served
            .call(
                http.post(format!("{}/api/terminals", served.base))
                    .bearer_auth(&secret)
                    .header("content-type", "application/json")
                    .body("{}"),
            )
            .await;
        assert_eq!(status, 403, "a read-only link's session spawned");

        let listed = served.cli.run(&["link", "--list", "--json"]);
        let links: Value = serde_json::from_slice(&listed.stdout).unwrap();
        let ours = links
            .as_array()
            .unwrap()
            .iter()
            .find(|link| link["read_only"] == true)
            .unwrap_or_else(|| panic!("{links}"))
            .clone();
        assert_eq!(
            (ours["used"].clone(), ours["sessions"].clone()),
            (json!(true), json!(1))
        );
        let expires = ours["expires_at"].as_u64().unwrap();
        assert!((now() + 7000..=now() + 7300).contains(&expires), "{ours}");
        let id = ours["id"].as_str().unwrap();
        let revoked = served.cli.run(&["link", "--revoke", id]);
        assert!(
            revoked.status.success(),
            "{}",
            String::from_utf8_lossy(&revoked.stderr)
        );
        let status = http
            .get(format!("{}/api/terminals", served.base))
            .bearer_auth(&secret)
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status.as_u16(), 401, "a revoked link's session still works");

        // A code that outlived its lifetime signs no one in.
        let short = served.cli.run(&["link", "--expires", "1s", "--json"]);
        let short: Value = serde_json::from_slice(&short.stdout).unwrap();
        let until = short["expires_at"].as_u64().unwrap() + 1;
        crate::support::poll("the code to expire", WAIT, || async {
            (now() > until).then_some(())
        })
        .await;
        let answer = sign_in(short["code"].as_str().unwrap().to_owned())
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), 401);
        // A wrong token gets the serve's refusal, with its code.
        let refused = served
            .cli
            .command(&["link"])
            .env("TMUX_ENGINE_TOKEN", "wrongwrongwrongwrong")
            .output()
            .unwrap();
        assert!(!refused.status.success());
        assert!(
            String::from_utf8_lossy(&refused.stderr).contains("UNAUTHORIZED"),
            "{}",
            String::from_utf8_lossy(&refused.stderr)
        );
    })
    .await;
}

#[tokio::test]
async fn a_share_link_sees_and_touches_only_its_terminal_until_revoked() {
    within(async {
        let served = Served::start(&[]).await;
        let shared = served.spawn(r#"{"name":"shared","command":["sh"]}"#).await;
        let other = served.spawn(r#"{"name":"other","command":["sh"]}"#).await;
        let shared_id = shared["id"].as_str().unwrap().to_owned();
        let other_id = other["id"].as_str().unwrap().to_owned();
        let minted = served
            .cli
            .run(&["link", "--terminal", "shared", "--expires", "1h", "--json"]);
        assert!(
            minted.status.success(),
            "{}",
            String::from_utf8_lossy(&minted.stderr)
        );
        let minted: Value = serde_json::from_slice(&minted.stdout).unwrap();
        assert_eq!(minted["terminal"], shared_id.as_str(), "{minted}");
        let http = reqwest::Client::new();
        let session: Value = http
            .post(format!("{}/api/sign-in", served.base))
            .header("content-type", "application/json")
            .body(json!({"code": minted["code"]}).to_string())
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let holder = Holder {
            base: served.base.clone(),
            token: session["session"].as_str().unwrap().to_owned(),
        };
        let (status, list) = holder.get("/api/terminals").await;
        let ids: Vec<&str> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap())
            .collect();
        assert_eq!((status, ids), (200, vec![shared_id.as_str()]));
        let (_, viewers) = holder.get("/api/viewers").await;
        assert!(viewers.get(&other_id).is_none(), "{viewers}");
        assert_eq!(holder.get("/api/terminals/shared/screen").await.0, 200);
        assert_eq!(holder.get("/api/terminals/shared/commands").await.0, 200);
        assert_eq!(
            holder.get(&format!("/api/terminals/{shared_id}")).await.0,
            200
        );
        let (status, _) = holder
            .post(
                "/api/terminals/shared/send",
                r#"{"text":"echo hi","submit":true,"wait":"none"}"#,
            )
            .await;
        assert_eq!(status, 200);
        for path in [
            "/api/terminals/other",
            "/api/terminals/other/screen",
            "/api/terminals/other/commands",
            &format!("/api/terminals/{other_id}/scrollback"),
        ] {
            let (status, answer) = holder.get(path).await;
            assert_eq!(
                (status, answer["error"]["code"].as_str()),
                (404, Some("NO_TERMINAL")),
                "{path}"
            );
        }
        for (status, answer) in [
            holder.post("/api/terminals", r#"{"command":["sh"]}"#).await,
            holder.post("/api/links", "{}").await,
            holder.get("/api/links").await,
            holder.get("/api/search?regex=x").await,
            holder.delete("/api/terminals/shared").await,
        ] {
            assert_eq!(
                (status, answer["error"]["code"].as_str()),
                (403, Some("FORBIDDEN_SCOPE")),
                "{answer}"
            );
        }
        let mut ws = holder.ws("other").await;
        assert_eq!(ws.close_code().await, 4404);
        let mut ws = holder.ws("shared").await;
        assert_eq!(ws.text().await["type"], "hello");
        ws.close().await;
        // Revoked: the holder is out.
        let revoked = served
            .cli
            .run(&["link", "--revoke", minted["id"].as_str().unwrap()]);
        assert!(revoked.status.success());
        assert_eq!(holder.get("/api/terminals/shared/screen").await.0, 401);
        for name in ["shared", "other"] {
            served
                .call(served.request(reqwest::Method::DELETE, &format!("/api/terminals/{name}")))
                .await;
        }
    })
    .await;
}

/// A client acting with a session (a share link's holder).
struct Holder {
    base: String,
    token: String,
}

impl Holder {
    async fn send(&self, request: reqwest::RequestBuilder) -> (u16, Value) {
        let response = request.bearer_auth(&self.token).send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Client::new().get(format!("{}{path}", self.base)))
            .await
    }

    async fn delete(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Client::new().delete(format!("{}{path}", self.base)))
            .await
    }

    async fn post(&self, path: &str, body: &str) -> (u16, Value) {
        self.send(
            reqwest::Client::new()
                .post(format!("{}{path}", self.base))
                .header("content-type", "application/json")
                .body(body.to_owned()),
        )
        .await
    }

    async fn ws(&self, target: &str) -> super::Ws {
        let host = self.base.trim_start_matches("http://");
        let url = format!("ws://{host}/api/terminals/{target}/attach");
        let (socket, _) = tokio::time::timeout(
            WAIT,
            tokio_tungstenite::connect_async(super::ws_request(&url, &self.token)),
        )
        .await
        .unwrap()
        .unwrap();
        super::Ws { socket }
    }
}

#[tokio::test]
async fn the_page_shares_one_terminal_and_the_holder_sees_only_it() {
    let binary = chromium_required();
    within(async {
        let served = Served::start(&[]).await;
        served.spawn(r#"{"name":"shared","shell":"echo shared-$((2*21)); exec cat"}"#).await;
        served.spawn(r#"{"name":"private","command":["sh"]}"#).await;
        let url = format!("{}/#code={}&t=shared", served.base, served.code);
        let mut owner = Browser::open(&binary, &url).await;
        owner
            .until("shared opened", "typeof tmuxEngine === 'object' && tmuxEngine.name === 'shared'")
            .await;
        owner
            .eval("document.getElementById('share').click(); document.getElementById('share-ro').click()")
            .await;
        owner
            .until("the share link", "(tmuxEngine.lastShare || '').includes('#code=')")
            .await;
        let link = owner.eval("tmuxEngine.lastShare").await;
        let link = link.as_str().unwrap().to_owned();
        assert_eq!(owner.eval("tmuxEngine.lastCopy").await, link.as_str());
        let mut holder = Browser::open(&binary, &link).await;
        holder
            .until(
                "the holder's terminal",
                "typeof tmuxEngine === 'object' && tmuxEngine.name === 'shared' && tmuxEngine.readOnly",
            )
            .await;
        holder.line("shared-42").await;
        assert_eq!(
            holder
                .eval("[[...document.querySelectorAll('#terminals li')].map(li => li.dataset.name), getComputedStyle(document.getElementById('new')).display, getComputedStyle(document.getElementById('share-menu')).display]")
                .await,
            json!([["shared"], "none", "none"])
        );
        holder.screenshot("shared.png").await;
        holder.close().await;
        owner.close().await;
        for name in ["shared", "private"] {
            served
                .call(served.request(reqwest::Method::DELETE, &format!("/api/terminals/{name}")))
                .await;
        }
    })
    .await;
}
