//! Identity behind a trusted proxy and the audit log, on the real binary:
//! the user header names the owner from a `--trusted-proxy` address only
//! (403 `UNTRUSTED_PROXY` from any other), and `--audit-log` records
//! sign-in, links, spawn, send, input bursts and kill (who, which
//! terminal, how many bytes, never the bytes), 0600, a chain that `audit
//! verify` checks and that names the first bad line after an edit, a
//! deletion and a reorder.

use std::os::unix::fs::PermissionsExt;

use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use super::{Served, Ws};
use crate::cli::Cli;
use crate::support::within;

const HEADER: &str = "X-Forwarded-User";

/// A request as the proxy sends it: the user in the header, no token.
fn as_user(
    served: &Served,
    method: reqwest::Method,
    path: &str,
    user: &str,
) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .request(method, format!("{}{path}", served.base))
        .header(HEADER, user)
}

fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[tokio::test]
async fn a_trusted_proxy_names_the_owner_and_every_act_is_audited() {
    within(async {
        let cli = Cli::new();
        let log = cli.state().with_file_name("audit.jsonl");
        let log_arg = log.to_str().unwrap().to_owned();
        let served = Served::start_with(
            cli,
            &[
                "--trusted-proxy",
                "127.0.0.1/32",
                "--user-header",
                HEADER,
                "--audit-log",
                &log_arg,
            ],
            &[],
        )
        .await;
        // The printed link, used: a sign-in on the record.
        let (status, _) = served
            .call(
                reqwest::Client::new()
                    .post(format!("{}/api/sign-in", served.base))
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(json!({ "code": served.code }).to_string()),
            )
            .await;
        assert_eq!(status, 200);
        let (status, who) = served
            .call(as_user(
                &served,
                reqwest::Method::GET,
                "/api/session",
                "alice",
            ))
            .await;
        assert_eq!(
            (status, who["owner"].as_str()),
            (200, Some("alice")),
            "{who}"
        );
        let (status, spawned) = served
            .call(
                as_user(&served, reqwest::Method::POST, "/api/terminals", "alice")
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(r#"{"name":"a","command":["sh"]}"#),
            )
            .await;
        assert_eq!(status, 201, "{spawned}");
        let id = spawned["id"].as_str().unwrap().to_owned();
        // alice's terminal is not the token owner's.
        let (_, mine) = served.get("/api/terminals").await;
        assert_eq!(mine.as_array().unwrap().len(), 0, "{mine}");
        // A link minted as alice.
        let (status, _) = served
            .call(
                as_user(&served, reqwest::Method::POST, "/api/links", "alice")
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body("{}"),
            )
            .await;
        assert_eq!(status, 201);
        // Typed through a viewer the proxy let in.
        let mut request = served.ws_url(&id, "").into_client_request().unwrap();
        request
            .headers_mut()
            .insert(HEADER, HeaderValue::from_static("alice"));
        let mut ws = Ws::connect(request).await;
        assert_eq!(ws.text().await["type"], "hello");
        ws.input(b"echo secret-words\r").await;
        let mut seen = super::Received::default();
        seen.until(&mut ws, "secret-words").await;
        let (status, _) = served
            .call(
                as_user(
                    &served,
                    reqwest::Method::POST,
                    "/api/terminals/a/send",
                    "alice",
                )
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(r#"{"text":"echo more","submit":true,"wait":"none"}"#),
            )
            .await;
        assert_eq!(status, 200);
        let (status, _) = served
            .call(as_user(
                &served,
                reqwest::Method::DELETE,
                "/api/terminals/a",
                "alice",
            ))
            .await;
        assert_eq!(status, 200);
        // The viewer ends with its terminal: its burst is written then.
        assert_eq!(ws.close_code().await, 4404);
        let acts = tokio::time::timeout(super::WAIT, async {
            loop {
                let acts = lines(&log);
                if acts.iter().any(|act| act["act"] == "input") {
                    return acts;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("no input burst recorded");
        let find = |name: &str| {
            acts.iter()
                .find(|act| act["act"] == name)
                .unwrap_or_else(|| panic!("no {name} in {acts:?}"))
        };
        assert_eq!(find("sign_in")["who"], "tester");
        assert_eq!(find("link")["who"], "alice");
        let spawn = find("spawn");
        assert_eq!(
            (&spawn["who"], &spawn["via"]),
            (&json!("alice"), &json!("proxy"))
        );
        assert_eq!(spawn["terminal"], id.as_str());
        assert_eq!(find("send")["bytes"], 9);
        assert_eq!(find("kill")["terminal"], "a");
        let input = find("input");
        assert_eq!(
            (&input["who"], &input["terminal"]),
            (&json!("alice"), &json!(id))
        );
        assert_eq!(input["bytes"], 18);
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(
            !text.contains("secret") && !text.contains("echo"),
            "bytes on record: {text}"
        );
        let mode = std::fs::metadata(&log).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // The chain holds, and `audit verify` names the first bad line.
        let verify = |cli: &Cli| cli.run(&["audit", "verify", &log_arg]);
        let sound = verify(&served.cli);
        let said = String::from_utf8_lossy(&sound.stdout);
        assert!(sound.status.success(), "{said}");
        assert!(
            said.starts_with(&format!("ok: {} lines, head ", acts.len())),
            "{said}"
        );
        let original: Vec<String> = text.lines().map(str::to_owned).collect();
        let write = |lines: &[String]| std::fs::write(&log, lines.join("\n") + "\n").unwrap();
        let broken_at = |cli: &Cli| {
            let output = verify(cli);
            assert!(!output.status.success());
            String::from_utf8_lossy(&output.stderr).into_owned()
        };
        let mut edited = original.clone();
        edited[1] = edited[1].replace("\"who\":\"", "\"who\":\"x");
        write(&edited);
        let said = broken_at(&served.cli);
        assert!(
            said.contains("AUDIT_BROKEN") && said.contains("line 2:"),
            "{said}"
        );
        let mut deleted = original.clone();
        deleted.remove(1);
        write(&deleted);
        assert!(broken_at(&served.cli).contains("line 2:"));
        let mut moved = original.clone();
        moved.swap(2, 3);
        write(&moved);
        assert!(broken_at(&served.cli).contains("line 3:"));
    })
    .await;
}

#[tokio::test]
async fn the_user_header_from_another_peer_is_refused() {
    within(async {
        let served =
            Served::start(&["--trusted-proxy", "10.0.0.0/8", "--user-header", HEADER]).await;
        let (status, refused) = served
            .call(as_user(
                &served,
                reqwest::Method::GET,
                "/api/terminals",
                "alice",
            ))
            .await;
        assert_eq!(status, 403, "{refused}");
        assert_eq!(refused["error"]["code"], "UNTRUSTED_PROXY");
        // Nor does a token beside it make it count.
        let (status, _) = served
            .call(
                as_user(&served, reqwest::Method::GET, "/api/terminals", "alice")
                    .bearer_auth(&served.token),
            )
            .await;
        assert_eq!(status, 403);
        // Without the header the token works as ever.
        assert_eq!(served.get("/api/terminals").await.0, 200);
    })
    .await;
}
