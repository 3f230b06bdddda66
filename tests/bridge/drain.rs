//! Drain on SIGTERM: viewers close with 1012 and the reason the page
//! shows, a request in flight finishes, the terminal keeps running, and
//! the next serve on the same address and state directory takes the
//! page's session over, so its reconnect is signed in.

use std::time::Instant;

use serde_json::json;

use super::{Served, Ws, spawn_serve, ws_request};
use crate::support::within;

#[tokio::test]
async fn sigterm_drains_and_the_next_serve_takes_the_page_back() {
    within(async {
        let mut first = Served::start(&[]).await;
        let spawned = first.spawn(r#"{"name":"keep"}"#).await;
        let id = spawned["id"].as_str().unwrap().to_owned();
        // The page's way in: a one-time code exchanged for a session.
        let code = first.sign_in_code("{}").await;
        let (status, session) = first
            .call(
                reqwest::Client::new()
                    .post(format!("{}/api/sign-in", first.base))
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(json!({ "code": code }).to_string()),
            )
            .await;
        assert_eq!(status, 200, "{session}");
        let session = session["session"].as_str().unwrap().to_owned();
        let mut ws = Ws::connect(ws_request(&first.ws_url(&id, ""), &session)).await;
        assert_eq!(ws.text().await["type"], "hello");
        // A send in flight across the SIGTERM: it waits for its command.
        let slow = {
            let request = first
                .request(reqwest::Method::POST, "/api/terminals/keep/send")
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(r#"{"text":"sleep 2; echo drained-$((6*7))","submit":true}"#);
            tokio::spawn(async move {
                let response = request.send().await.unwrap();
                (response.status().as_u16(), response.text().await.unwrap())
            })
        };
        // In flight once the shell echoed it.
        let mut seen = super::Received::default();
        seen.until(&mut ws, "echo drained-").await;
        let began = Instant::now();
        let status = first.terminate().await;
        let took = began.elapsed();
        assert!(status.success(), "{status}");
        let (code, reason) = ws.close_frame().await;
        assert_eq!(
            (code, reason.as_str()),
            (1012, "this host is restarting; reconnecting\u{2026}")
        );
        let (status, answer) = slow.await.unwrap();
        assert_eq!(status, 200, "{answer}");
        assert!(answer.contains("drained-42"), "{answer}");
        eprintln!("drain with one viewer and one send in flight: {took:?}");
        let shown = first.cli.ok(&["--json", "show", "keep"]);
        assert!(shown.contains("\"running\""), "{shown}");
        // The next serve on the same address and state directory.
        let addr = first.base.trim_start_matches("http://").to_owned();
        let mut command =
            tokio::process::Command::from(first.cli.command(&["serve", "--listen", &addr]));
        command.env("TMUX_ENGINE_TOKEN", &first.token);
        let (child, line, token) = spawn_serve(command).await;
        let cli = std::mem::replace(&mut first.cli, crate::cli::Cli::new());
        let second = Served::from_url(child, cli, &line, &token);
        let (status, who) = second
            .call(
                reqwest::Client::new()
                    .get(format!("{}/api/session", second.base))
                    .bearer_auth(&session),
            )
            .await;
        assert_eq!(status, 200, "the session did not survive: {who}");
        let mut again = Ws::connect(ws_request(&second.ws_url(&id, ""), &session)).await;
        let hello = again.text().await;
        assert_eq!(hello["id"], id.as_str(), "{hello}");
        assert!(
            !second
                .cli
                .state()
                .join(tmux_engine::bridge::HANDOFF)
                .exists(),
            "the handoff is read once"
        );
        second.cli.ok(&["kill", "keep"]);
    })
    .await;
}
