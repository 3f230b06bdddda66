//! Issue 46, items 1 and 9: access that ends ends for open viewers too,
//! and a read-only holder cannot spend the owner's links. A real serve on
//! 127.0.0.1, raw WebSocket clients: a share link's viewer is closed 4401
//! when its link is revoked or expires, a signed-out session's viewer
//! too, and nothing it types arrives after.

use std::time::Instant;

use serde_json::{Value, json};

use super::{Served, WAIT, Ws};
use crate::support::within;

/// Exchanges a sign-in code for a session secret.
async fn session(served: &Served, code: &str) -> Value {
    reqwest::Client::new()
        .post(format!("{}/api/sign-in", served.base))
        .header("content-type", "application/json")
        .body(json!({ "code": code }).to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// A WebSocket on `target` with the credential `secret`.
async fn attach(served: &Served, target: &str, secret: &str) -> Ws {
    let url = served.ws_url(target, "");
    let (socket, _) = tokio::time::timeout(
        WAIT,
        tokio_tungstenite::connect_async(super::ws_request(&url, secret)),
    )
    .await
    .unwrap()
    .unwrap();
    Ws::from(socket)
}

/// Mints a share link for `target` with the CLI and signs in with it.
async fn share(served: &Served, target: &str, expires: &str) -> (String, String) {
    let minted = served
        .cli
        .run(&["link", "--terminal", target, "--expires", expires, "--json"]);
    assert!(
        minted.status.success(),
        "{}",
        String::from_utf8_lossy(&minted.stderr)
    );
    let minted: Value = serde_json::from_slice(&minted.stdout).unwrap();
    let answer = session(served, minted["code"].as_str().unwrap()).await;
    (
        minted["id"].as_str().unwrap().to_owned(),
        answer["session"].as_str().unwrap().to_owned(),
    )
}

/// Reads frames until the close; its code, and how long it took.
async fn closed(ws: &mut Ws, since: Instant) -> (u16, f64) {
    let code = ws.close_code().await;
    (code, since.elapsed().as_secs_f64())
}

#[tokio::test]
async fn a_revoked_or_expired_link_and_a_signed_out_session_close_their_viewers() {
    within(async {
        let served = Served::start(&[]).await;
        served.spawn(r#"{"name":"shared","command":["cat"]}"#).await;

        // Revoked: the open viewer is closed 4401.
        let (id, secret) = share(&served, "shared", "1h").await;
        let mut ws = attach(&served, "shared", &secret).await;
        assert_eq!(ws.text().await["type"], "hello");
        let revoked = served.cli.run(&["link", "--revoke", &id]);
        assert!(revoked.status.success());
        let (code, took) = closed(&mut ws, Instant::now()).await;
        eprintln!("revoked: closed {code} after {took:.3} s");
        assert_eq!(code, 4401);

        // Expired (a 2 s share link): closed 4401 at its end, and the
        // REST side agrees.
        let (_, secret) = share(&served, "shared", "2s").await;
        let mut ws = attach(&served, "shared", &secret).await;
        assert_eq!(ws.text().await["type"], "hello");
        let (code, took) = closed(&mut ws, Instant::now()).await;
        eprintln!("expired: closed {code} after {took:.3} s");
        assert_eq!(code, 4401);
        let status = reqwest::Client::new()
            .get(format!("{}/api/terminals/shared/screen", served.base))
            .bearer_auth(&secret)
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status.as_u16(), 401);

        // Signed out: a whole-owner session's viewer goes too.
        let code = served.sign_in_code("{}").await;
        let answer = session(&served, &code).await;
        let secret = answer["session"].as_str().unwrap().to_owned();
        let mut ws = attach(&served, "shared", &secret).await;
        assert_eq!(ws.text().await["type"], "hello");
        let out = reqwest::Client::new()
            .delete(format!("{}/api/session", served.base))
            .bearer_auth(&secret)
            .send()
            .await
            .unwrap();
        assert_eq!(out.status().as_u16(), 200);
        let (code, took) = closed(&mut ws, Instant::now()).await;
        eprintln!("signed out: closed {code} after {took:.3} s");
        assert_eq!(code, 4401);

        // The owner's token viewer is untouched by all of it.
        let mut owner = served.ws("shared", "", None).await;
        assert_eq!(owner.text().await["type"], "hello");
        owner.input(b"still-here\n").await;
        let mut received = super::Received::default();
        received.until(&mut owner, "still-here").await;
        owner.close().await;
        served
            .call(served.request(reqwest::Method::DELETE, "/api/terminals/shared"))
            .await;
    })
    .await;
}

/// 256 read-only links with a week to live once made the owner's `link`
/// fail ("256 links are live already"); they count against read-only
/// callers now.
#[tokio::test]
async fn read_only_links_do_not_spend_the_owners() {
    within(async {
        let served = Served::start(&[]).await;
        let minted = served.cli.run(&["link", "--read-only", "--json"]);
        assert!(minted.status.success());
        let minted: Value = serde_json::from_slice(&minted.stdout).unwrap();
        let answer = session(&served, minted["code"].as_str().unwrap()).await;
        let secret = answer["session"].as_str().unwrap().to_owned();
        assert_eq!(answer["read_only"], true);
        let http = reqwest::Client::new();
        let mut refused = None;
        for _ in 0..300 {
            let response = http
                .post(format!("{}/api/links", served.base))
                .bearer_auth(&secret)
                .header("content-type", "application/json")
                .body(r#"{"expires":604800}"#)
                .send()
                .await
                .unwrap();
            if response.status().as_u16() != 201 {
                refused = Some((response.status().as_u16(), response.text().await.unwrap()));
                break;
            }
        }
        let (status, text) = refused.expect("read-only minting has a bound");
        assert_eq!(status, 400, "{text}");
        assert!(text.contains("read-only"), "{text}");
        let owners = served.cli.run(&["link"]);
        assert!(
            owners.status.success(),
            "the owner's link: {}",
            String::from_utf8_lossy(&owners.stderr)
        );
    })
    .await;
}
